// greentrain ablate: the co-design ablation of DESIGN.md. Runs, on the same data and seed,
// one after another: the baseline (fp32, unfused, no recomputation), then the techniques of
// --order switched on one by one (cumulative): bf16 mixed precision, kernel fusion, and
// activation recomputation with the larger micro-batch it lets fit in the memory budget.
// Each row is a `greentrain train` child process (so its peak memory is its own), measured
// with the energy meter; the table gives tokens/s, J/token, tokens/J, peak memory, batch,
// loss, validation loss, and the factors (performance per watt, tokens/J) against the row
// before and the baseline beside the survey's claimed factors. The power-limit row is shown
// as not measured when this machine has no writable power limit.
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "cli/command.h"
#include "core/atomic_file.h"
#include "core/bytes_json.h"
#include "core/error.h"
#include "core/json_number.h"
#include "train/config.h"
#include "train/data.h"
#ifdef GT_HAVE_REPORT
#include "report/report.h"
#endif

namespace fs = std::filesystem;

namespace {

struct Args {
  std::string config, data, out = "runs/ablate", order = "bf16,fusion,recompute";
  std::string recompute = "block";
  std::vector<std::string> sets;
  int steps = 200;
  int rounds = 1;
  int64_t memory_budget = 0;
  bool has_target = false;  ///< train.target_loss is set: rows are ranked by joules to target
  std::string json;         ///< --json PATH ("-": standard output)
};

// Where the human-readable lines go: standard error when the JSON goes to standard output.
FILE* g_out = stdout;

/// The survey's claimed gain in performance per watt of each technique.
double claimed_factor(const std::string& t) {
  if (t == "bf16") return 2.0;
  if (t == "fusion") return 1.2;
  if (t == "recompute") return 1.5;
  if (t == "power_limit") return 1.12;
  // not in the survey: Transformer Engine's fp8 over bf16 on billion-parameter GPTs (NVIDIA,
  // "Using FP8 with Transformer Engine", 1.3-1.4x); the lower figure
  if (t == "fp8") return 1.3;
  return 1.0;
}

struct Row {
  std::string name, precision = "fp32", fusion = "off", recompute = "none";
  int batch = 0;
  double tokens_per_s = 0, loss = 0;
  std::optional<double> joules_per_token, tokens_per_joule;  ///< empty: energy unknown
  double val_loss = NAN;
  bool estimated = true;
  std::string energy = "unknown";     ///< measured | estimated | unknown
  std::string energy_unknown_reason;  ///< why, when energy is unknown
  /// What the energy covers: the logged training intervals, or the whole run when those could
  /// not be used (then it also holds the final validation pass, and the table says so).
  std::string energy_basis;
  std::string flags;  ///< the meter's flags (a sensor missing, untrusted samples)
  size_t peak_rss = 0, planned = 0;
  nlohmann::json target;  ///< summary.json's "target" (null without train.target_loss)
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

volatile sig_atomic_t g_child = 0;
void forward_signal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

/// Runs `sh -c cmd` and returns its wait status. SIGINT and SIGTERM reach the child (which
/// saves a checkpoint and exits 130/143) instead of leaving it running without its parent.
/// `progress` is called about once a second while the child runs.
int run_child(const std::string& cmd, const std::function<void()>& progress = {}) {
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), (char*)nullptr);
    _exit(127);
  }
  int status = 0;
  if (pid > 0) {
    g_child = pid;
    for (;;) {
      const pid_t w = waitpid(pid, &status, WNOHANG);
      if (w == pid || (w < 0 && errno != EINTR)) break;
      if (w == 0) {
        if (progress) progress();
        usleep(100000);
      }
    }
    g_child = 0;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (pid < 0) throw gt::Error("cannot start a row: fork failed");
  return status;
}

// The step of the last line of a run's metrics.jsonl, or -1 when there is none yet.
long long last_logged_step(const fs::path& metrics) {
  std::ifstream f(metrics);
  std::string line, last;
  while (std::getline(f, line))
    if (!line.empty()) last = line;
  if (last.empty()) return -1;
  try {
    const auto j = nlohmann::json::parse(last);
    return j.value("step", -1LL);
  } catch (const nlohmann::json::exception&) {
    return -1;  // a line being written
  }
}

// Runs steps (stop_at - previous stop] of one row as `greentrain train`: the first segment
// starts the run, later ones resume its checkpoint (bit for bit), so rounds of segments
// interleave the rows and the machine's drift hits every row alike.
void run_segment(const Args& a, const std::string& data, const Row& row, const fs::path& dir,
                 int stop_at, bool first) {
  std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::string cmd;
  if (first) {
    fs::remove_all(dir);
    cmd = fmt::format("{} train {} --out {}", shell_quote(exe), shell_quote(a.config),
                      shell_quote(dir.string()));
    if (!data.empty()) cmd += " --data " + shell_quote(data);
    for (auto& s : a.sets) cmd += " --set " + shell_quote(s);
    // with a target the validation passes of the configuration find when it is reached
    if (!a.has_target) cmd += " --set " + shell_quote("train.eval_interval=0");
    for (auto s :
         {fmt::format("train.max_steps={}", a.steps), std::string("train.checkpoint_interval=0"),
          fmt::format("train.log_interval={}", std::max(1, a.steps / a.rounds / 10)),
          fmt::format("train.batch_size={}", row.batch), "train.precision=" + row.precision,
          "train.fusion=" + row.fusion, "train.recompute=" + row.recompute})
      cmd += " --set " + shell_quote(s);
  } else {  // the configuration comes from the checkpoint
    cmd = fmt::format("{} train --out {} --resume", shell_quote(exe), shell_quote(dir.string()));
  }
  if (stop_at < a.steps) cmd += fmt::format(" --stop-at {}", stop_at);
  fs::path log = dir.string() + ".log";
  std::fprintf(g_out,
               "  running %-12s (%s, fusion %s, recompute %s, micro-batch %d), steps to %d ...\n",
               row.name.c_str(), row.precision.c_str(), row.fusion.c_str(), row.recompute.c_str(),
               row.batch, stop_at);
  std::fflush(g_out);
  // progress: the row's last logged step, from its metrics.jsonl: on a terminal about every
  // second (one line rewritten); otherwise a line at its first logged step and every 30 s
  const bool tty = isatty(fileno(g_out));
  const auto t0 = std::chrono::steady_clock::now();
  auto last_shown = t0;
  long long shown_step = -1;
  auto progress = [&] {
    const auto now = std::chrono::steady_clock::now();
    const long long step = last_logged_step(dir / "metrics.jsonl");
    const bool due = tty ? now - last_shown >= std::chrono::seconds(1)
                         : step != shown_step &&
                               (shown_step < 0 || now - last_shown >= std::chrono::seconds(30));
    if (!due || (!tty && step < 0)) return;
    last_shown = now;
    shown_step = step;
    const double s = std::chrono::duration<double>(now - t0).count();
    const std::string text =
        step < 0 ? fmt::format("    {}: starting, {:.0f} s", row.name, s)
                 : fmt::format("    {}: step {} of {}, {:.0f} s", row.name, step, stop_at, s);
    std::fprintf(g_out, tty ? "\r%-60s" : "%s\n", text.c_str());
    std::fflush(g_out);
  };
  const int status = run_child(
      "exec " + cmd + (first ? " > " : " >> ") + shell_quote(log.string()) + " 2>&1", progress);
  if (tty && shown_step != -1) std::fprintf(g_out, "\r%-60s\r", "");
  if (WIFSIGNALED(status) ||
      (WIFEXITED(status) && (WEXITSTATUS(status) == 130 || WEXITSTATUS(status) == 143)))
    throw gt::Error(fmt::format("row '{}' was interrupted (its checkpoint is in {}); see {}",
                                row.name, dir.string(), log.string()));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw gt::Error(fmt::format("row '{}' failed (exit code {}); see {}", row.name,
                                WIFEXITED(status) ? WEXITSTATUS(status) : -1, log.string()));
  // memory is the fresh run's: a resumed segment also holds the checkpoint it reads
  if (first)
    fs::copy_file(dir / "summary.json", dir / "summary.first.json",
                  fs::copy_options::overwrite_existing);
}

// Reads a finished row's run folder. starts: the first step of each segment (these steps
// create the kernels and are left out of tokens/s, as is the logged energy interval holding
// them).
void read_row(Row& row, const fs::path& dir, const std::vector<int>& starts) {
  std::ifstream sf(dir / "summary.json");
  auto s = nlohmann::json::parse(sf);
  row.loss = s.value("last_loss", 0.0);
  if (s.contains("target")) row.target = s["target"];
  if (s.contains("val_loss")) row.val_loss = s["val_loss"].get<double>();
  nlohmann::json mem = s;  // the first segment's (a fresh start), when rounds resumed it
  if (fs::exists(dir / "summary.first.json")) {
    std::ifstream ff(dir / "summary.first.json");
    mem = nlohmann::json::parse(ff);
  }
  row.peak_rss = mem.value("memory_peak_rss_bytes", size_t(0));
  // the plan's arenas plus what the process held before allocating them
  row.planned =
      mem.value("memory_planned_bytes", size_t(0)) + mem.value("memory_runtime_bytes", size_t(0));
  row.estimated = s.value("energy_estimated", true);
  // training steps only: median step speed without the first (primitive creation) step;
  // energy of the logged training intervals (validation is outside them)
  // energy likewise leaves out the first logged interval (it holds step 1) when there are more
  std::ifstream mf(dir / "metrics.jsonl");
  std::string line;
  std::vector<double> tps;
  std::vector<std::pair<double, double>> intervals, all;  // (joules, tokens)
  int prev = 0;  // the step of the previous energy interval's end
  auto is_start = [&](int st) {
    return std::find(starts.begin(), starts.end(), st) != starts.end();
  };
  while (std::getline(mf, line)) {
    // a row's own file read back: a line cut by a crash, or a figure of another type or out of
    // range (a step of 1e300), is a damaged line, left out; never an abort after every row ran
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    const auto step_read = gt::json_integer<int>(j.value("step", nlohmann::json(0)), 0);
    const auto tps_read = j.value("tokens_per_s", nlohmann::json(0.0));
    if (!step_read || !tps_read.is_number()) continue;
    const int step = *step_read;
    if (!is_start(step)) tps.push_back(tps_read.get<double>());
    if (j.contains("energy_j") && j.contains("energy_interval_tokens") &&
        j["energy_interval_tokens"].is_number()) {
      // an unknown interval (null) is NaN here, so the sum below is unknown too
      std::pair<double, double> e{j["energy_j"].is_number() ? j["energy_j"].get<double>() : NAN,
                                  j["energy_interval_tokens"].get<double>()};
      all.push_back(e);
      bool holds_start = false;
      for (int st : starts) holds_start |= prev < st && st <= step;
      if (!holds_start) intervals.push_back(e);
      prev = step;
    }
  }
  if (intervals.empty()) intervals = all;  // too few intervals to leave any out
  double energy = 0, tokens = 0;
  for (auto& [j, t] : intervals) {
    energy += j;
    tokens += t;
  }
  row.tokens_per_s = median(tps);
  row.energy_basis = "training intervals";
  if (!(tokens > 0 && energy > 0)) {
    // The intervals' energy is unknown or reads 0 (intervals below the sensors' resolution):
    // use the whole run's window, which also holds the final validation pass, and say so.
    const bool run_known = s.contains("energy_j") && s["energy_j"].is_number();
    energy = run_known ? s["energy_j"].get<double>() : NAN;
    tokens = s.value("tokens", 0.0);
    row.energy_basis =
        fmt::format("whole run incl. final validation (the logged intervals' energy was {})",
                    std::isnan(energy) ? "unknown" : "unknown or 0");
  }
  if (s.contains("energy") && s["energy"].contains("flags"))  // e.g. a sensor left out
    for (auto& f : s["energy"]["flags"])
      row.flags += (row.flags.empty() ? "" : "; ") + f.get<std::string>();
  if (tokens > 0 && energy > 0) {
    row.joules_per_token = energy / tokens;
    row.tokens_per_joule = tokens / energy;
    row.energy = row.estimated ? "estimated" : "measured";
  } else {
    row.energy = "unknown";
    row.energy_unknown_reason = s.value(
        "energy_unknown_reason",
        std::isnan(energy) ? std::string("no sensor counted")
                           : fmt::format("the meter read {} J over {} tokens", energy, tokens));
  }
}

// "unknown" for an empty figure, never 0 or nan.
std::string fmt_or_unknown(std::optional<double> v, const char* spec, int width) {
  const std::string t = v ? fmt::format(fmt::runtime(spec), *v) : "unknown";
  return fmt::format("{:>{}}", t, width);
}

std::optional<double> ratio_of(std::optional<double> x, std::optional<double> y) {
  if (!x || !y || !(*y > 0)) return std::nullopt;
  return *x / *y;
}

nlohmann::ordered_json json_of(std::optional<double> v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
}

std::string csv_of(std::optional<double> v, const char* spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : "";
}

// Joules to train.target_loss of a row; empty when not reached or unknown.
std::optional<double> joules_to_target(const Row& w) {
  if (!w.target.is_object() || !w.target.value("reached", false) ||
      !w.target.contains("energy_j") || !w.target["energy_j"].is_number())
    return std::nullopt;
  return w.target["energy_j"].get<double>();
}

bool power_limit_writable() {
  for (const char* p : {"/sys/class/powercap/intel-rapl:0/constraint_0_power_limit_uw",
                        "/sys/class/powercap/intel-rapl/intel-rapl:0/constraint_0_power_limit_uw"})
    if (access(p, W_OK) == 0) return true;
  return false;
}

int run_ablate(const Args& a) {
  if (a.config.empty())
    throw gt::Error("a configuration file is needed, e.g. configs/shakespeare-char.toml");
  if (a.steps < 2) throw gt::Error(fmt::format("--steps {}: expected at least 2", a.steps));
  if (a.rounds < 1 || a.steps / a.rounds < 2)
    throw gt::Error(fmt::format("--rounds {}: expected 1 to {} (at least 2 steps per round)",
                                a.rounds, a.steps / 2));
  for (auto& kv : a.sets) {  // the keys each row sets itself
    const std::string key = kv.substr(0, kv.find('='));
    // (train.batch_size may be set: it is the baseline's micro-batch without --memory-budget)
    for (const char* own : {"train.memory_budget", "train.precision", "train.fusion",
                            "train.recompute", "train.max_steps"})
      if (key == own)
        throw gt::Error(fmt::format(
            "--set {}: ablate sets {} for each row itself (use --memory-budget, --order, "
            "--recompute or --steps)",
            kv, own));
  }
  if (a.memory_budget < 0)
    throw gt::Error(
        fmt::format("--memory-budget {}: expected a positive number of bytes", a.memory_budget));
  if (a.recompute != "gelu" && a.recompute != "gelu+ln" && a.recompute != "block")
    throw gt::Error(fmt::format("--recompute '{}': expected gelu, gelu+ln or block", a.recompute));
  gt::TrainConfig cfg;
  gt::load_config_file(a.config, cfg);
  gt::apply_overrides(a.sets, cfg);
  // the backend the rows train on reports its workspace (per thread on the CPU)
  const auto backend = gt::make_backend(cfg.device, {.threads = cfg.threads});
  if (!a.data.empty()) cfg.data_path = a.data;
  cfg.validate();
  if (cfg.stop_at_target && a.rounds > 1)
    throw gt::Error(
        "--set train.stop_at_target=true: a row that stops early cannot be resumed in the next "
        "round; use --rounds 1");
  gt::parse_recompute(a.recompute);
  std::vector<std::string> order;
  {
    std::stringstream ss(a.order);
    std::string t;
    std::set<std::string> seen;
    while (std::getline(ss, t, ',')) {
      if (t != "bf16" && t != "fusion" && t != "recompute" && t != "fp8")
        throw gt::Error(fmt::format(
            "--order '{}': '{}' is unknown; expected a list of bf16, fusion, recompute, fp8 (fp8: "
            "train.device = cuda)",
            a.order, t));
      if (!seen.insert(t).second)
        throw gt::Error(fmt::format("--order '{}': '{}' appears twice", a.order, t));
      order.push_back(t);
    }
    if (order.empty()) throw gt::Error("--order is empty; expected e.g. bf16,fusion,recompute");
  }
  gt::TokenData data = gt::load_data(cfg, nullptr);
  if (cfg.model.vocab_size == 0) cfg.model.vocab_size = data.tokenizer.vocab_size();
  const gt::GPTConfig& m = cfg.model;
  size_t budget = a.memory_budget > 0 ? static_cast<size_t>(a.memory_budget)
                                      : gt::plan_memory(m, cfg.batch_size, gt::Recompute::none,
                                                        false, gt::Precision::fp32, *backend)
                                            .total();
  int base_batch = gt::largest_batch_that_fits(m, gt::Recompute::none, false, gt::Precision::fp32,
                                               budget, *backend);
  if (base_batch == 0)
    throw gt::Error(
        fmt::format("--memory-budget {}: the baseline does not fit a micro-batch of 1", budget));
  if (a.memory_budget == 0) base_batch = cfg.batch_size;
  fs::create_directories(a.out);
  // rows of an earlier ablation in this folder would sit beside the new table: remove them
  const std::regex row_dir(R"([0-9]+_(baseline|\+[a-z0-9_]+)(\.log)?)");
  for (auto& e : fs::directory_iterator(a.out))
    if (std::regex_match(e.path().filename().string(), row_dir)) fs::remove_all(e.path());
  std::fprintf(g_out, "greentrain ablate: %s, %d steps per row, memory budget %s (%s)\n",
               a.config.c_str(), a.steps, gt::format_bytes(budget).c_str(),
               a.memory_budget > 0 ? "--memory-budget" : "the baseline's plan");
  std::vector<Row> rows;
  Row r;
  r.name = "baseline";
  r.batch = base_batch;
  rows.push_back(r);
  for (auto& t : order) {
    r.name = "+" + t;
    if (t == "bf16") r.precision = "bf16";
    if (t == "fp8") r.precision = "fp8";
    if (t == "fusion") r.fusion = "on";
    if (t == "recompute") r.recompute = a.recompute;
    int fit = gt::largest_batch_that_fits(m, gt::parse_recompute(r.recompute), r.fusion == "on",
                                          gt::parse_precision(r.precision), budget, *backend);
    // the recompute row takes the larger batch it lets fit; the others keep the baseline's
    r.batch = t == "recompute" ? std::max(fit, 1) : std::max(1, std::min(base_batch, fit));
    rows.push_back(r);
  }
  const std::string data_path = cfg.data_path;
  Args args = a;
  args.has_target = cfg.target_loss > 0;
  auto folder = [&](size_t i) { return fs::path(a.out) / fmt::format("{}_{}", i, rows[i].name); };
  std::vector<int> starts;
  for (int r = 0; r < a.rounds; ++r) {
    const int from = (int)((int64_t)a.steps * r / a.rounds),
              to = (int)((int64_t)a.steps * (r + 1) / a.rounds);
    starts.push_back(from + 1);
    if (a.rounds > 1)
      std::fprintf(g_out, "round %d of %d: steps %d to %d of every row\n", r + 1, a.rounds,
                   from + 1, to);
    for (size_t i = 0; i < rows.size(); ++i)
      run_segment(args, data_path, rows[i], folder(i), to, r == 0);
  }
  for (size_t i = 0; i < rows.size(); ++i) read_row(rows[i], folder(i), starts);

  // table
  std::string csv =
      "row,precision,fusion,recompute,micro_batch,tokens_per_s,joules_per_token,tokens_per_joule,"
      "energy,peak_rss_bytes,planned_bytes,loss,val_loss,speedup_vs_prev,speedup_vs_baseline,"
      "factor_vs_prev,factor_vs_baseline,claimed_factor,claimed_cumulative,energy_basis,"
      "joules_to_target\n";
  nlohmann::ordered_json js = nlohmann::ordered_json::array();
  std::fprintf(g_out, "\n%-12s %6s %9s %9s %9s %10s %10s %6s %6s %7s %8s %8s %8s %8s %8s %9s  %s\n",
               "row", "batch", "tok/s", "J/token", "tok/J", "peak mem", "planned", "vs pl", "loss",
               "val", "spd prev", "spd base", "tokJ prev", "tokJ base", "claimed", "claim cum",
               "energy");
  double claimed_cum = 1.0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& w = rows[i];
    std::string tech = i == 0 ? "" : w.name.substr(1);
    double claimed = i == 0 ? 1.0 : claimed_factor(tech);
    claimed_cum *= claimed;
    auto ratio = [](double x, double y) { return y > 0 ? x / y : NAN; };
    const auto fprev = i == 0 ? ratio_of(w.tokens_per_joule, w.tokens_per_joule)
                              : ratio_of(w.tokens_per_joule, rows[i - 1].tokens_per_joule);
    const auto fbase = ratio_of(w.tokens_per_joule, rows[0].tokens_per_joule);
    double sprev = i == 0 ? 1.0 : ratio(w.tokens_per_s, rows[i - 1].tokens_per_s);
    double sbase = ratio(w.tokens_per_s, rows[0].tokens_per_s);
    const bool whole_run = w.tokens_per_joule && w.energy_basis != "training intervals";
    std::fprintf(
        g_out,
        "%-12s %6d %9.0f %9s %9s %10s %10s %+5.1f%% %6.3f %7.3f %7.2fx %7.2fx %9s %9s "
        "%7.2fx %8.2fx  %s%s\n",
        w.name.c_str(), w.batch, w.tokens_per_s,
        // significant digits: a small J/token is never 0.0000
        fmt_or_unknown(w.joules_per_token, "{:.4g}", 9).c_str(),
        fmt_or_unknown(w.tokens_per_joule, "{:.4g}", 9).c_str(),
        gt::format_bytes(w.peak_rss).c_str(), gt::format_bytes(w.planned).c_str(),
        w.planned ? 100.0 * ((double)w.peak_rss - (double)w.planned) / (double)w.planned : 0.0,
        w.loss, w.val_loss, sprev, sbase, fmt_or_unknown(fprev, "{:.2f}x", 9).c_str(),
        fmt_or_unknown(fbase, "{:.2f}x", 9).c_str(), claimed, claimed_cum, w.energy.c_str(),
        whole_run ? " (whole run)" : "");
    csv += fmt::format(
        "{},{},{},{},{},{:.1f},{},{},{},{},{},{:.5f},{:.5f},{:.4f},{:.4f},{},{},{:.4g},{:.4g},{},{}"
        "\n",
        w.name, w.precision, w.fusion, w.recompute, w.batch, w.tokens_per_s,
        csv_of(w.joules_per_token, "{:.6g}"), csv_of(w.tokens_per_joule, "{:.6g}"), w.energy,
        w.peak_rss, w.planned, w.loss, w.val_loss, sprev, sbase, csv_of(fprev, "{:.4f}"),
        csv_of(fbase, "{:.4f}"), claimed, claimed_cum, w.energy_basis,
        csv_of(joules_to_target(w), "{:.6g}"));
    nlohmann::ordered_json o;
    o["row"] = w.name;
    o["precision"] = w.precision;
    o["fusion"] = w.fusion;
    o["recompute"] = w.recompute;
    o["micro_batch"] = w.batch;
    o["tokens_per_s"] = w.tokens_per_s;
    o["joules_per_token"] = json_of(w.joules_per_token);
    o["tokens_per_joule"] = json_of(w.tokens_per_joule);
    o["energy"] = w.energy;
    o["energy_basis"] = w.energy_basis;
    if (!w.energy_unknown_reason.empty()) o["energy_unknown_reason"] = w.energy_unknown_reason;
    o["energy_flags"] = w.flags;
    o["peak_rss_bytes"] = w.peak_rss;
    o["planned_bytes"] = w.planned;
    o["loss"] = w.loss;
    o["val_loss"] =
        std::isnan(w.val_loss) ? nlohmann::ordered_json() : nlohmann::ordered_json(w.val_loss);
    o["speedup_vs_prev"] = sprev;
    o["speedup_vs_baseline"] = sbase;
    o["factor_vs_prev"] = json_of(fprev);
    o["factor_vs_baseline"] = json_of(fbase);
    o["claimed_factor"] = claimed;
    o["claimed_cumulative"] = claimed_cum;
    if (!w.target.is_null()) {
      o["target"] = w.target;
      o["joules_to_target"] = json_of(joules_to_target(w));
    }
    js.push_back(o);
  }
  const bool can_cap = power_limit_writable();
  const std::string cap_reason =
      can_cap ? "a writable power limit exists; run `greentrain tune` for this row"
              : "no writable power-limit interface (RAPL powercap or NVML) on this machine";
  claimed_cum *= claimed_factor("power_limit");
  std::fprintf(
      g_out,
      "%-12s %6s %9s %9s %9s %10s %10s %6s %6s %7s %8s %8s %8s %8s %7.2fx %8.2fx  not measured: "
      "%s\n",
      "+power_cap", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", 1.12,
      claimed_cum, cap_reason.c_str());
  csv += fmt::format("+power_cap,,,,,,,,not measured,,,,,,,,,1.12,{:.4g},,\n", claimed_cum);
  nlohmann::ordered_json cap;
  cap["row"] = "+power_cap";
  cap["measured"] = false;
  cap["reason"] = cap_reason;
  cap["claimed_factor"] = 1.12;
  cap["claimed_cumulative"] = claimed_cum;
  js.push_back(cap);
  const bool known = std::all_of(rows.begin(), rows.end(),
                                 [](const Row& w) { return w.tokens_per_joule.has_value(); });
  const auto combined = ratio_of(rows.back().tokens_per_joule, rows[0].tokens_per_joule);
  const double speed = rows.back().tokens_per_s / rows[0].tokens_per_s;
  const bool est =
      std::any_of(rows.begin(), rows.end(), [](const Row& w) { return w.energy == "estimated"; });
  std::fprintf(g_out,
               "\ncombined (measured rows): %.2fx tokens/s and %s tokens per joule against the "
               "baseline; the survey claims %.1fx with the power cap\n",
               speed, fmt_or_unknown(combined, "{:.2f}x", 0).c_str(), claimed_cum);
  if (est)
    std::fprintf(
        g_out,
        "energy is ESTIMATED here (CPU utilization x TDP, no energy counters), so tokens/J "
        "follows tokens/s\n");
  for (auto& w : rows)  // the reason once per row whose energy is unknown
    if (!w.tokens_per_joule)
      std::fprintf(g_out, "energy unknown for row %s: %s\n", w.name.c_str(),
                   w.energy_unknown_reason.c_str());
  for (auto& w : rows)
    if (w.tokens_per_joule && w.energy_basis != "training intervals")
      std::fprintf(g_out, "row %s: energy is the %s\n", w.name.c_str(), w.energy_basis.c_str());
  for (auto& w : rows)
    if (!w.flags.empty())
      std::fprintf(g_out, "warning: row %s: the energy meter flagged: %s\n", w.name.c_str(),
                   w.flags.c_str());
  std::fprintf(g_out,
               "tokens/s: median step without the first step of each run segment; J/token: the "
               "logged intervals without the ones holding those steps (they create the kernels)\n");
  nlohmann::ordered_json ranking = nlohmann::ordered_json::array();
  if (args.has_target) {
    // fewest joules to the target first; reached with unknown energy next; not reached last
    std::vector<const Row*> order_j;
    for (auto& w : rows) order_j.push_back(&w);
    auto rank = [](const Row* w) {
      return w->target.value("reached", false) ? (joules_to_target(*w) ? 0 : 1) : 2;
    };
    std::stable_sort(order_j.begin(), order_j.end(), [&](const Row* x, const Row* y) {
      if (rank(x) != rank(y)) return rank(x) < rank(y);
      return rank(x) == 0 && *joules_to_target(*x) < *joules_to_target(*y);
    });
    std::fprintf(g_out, "\nranked by joules to validation loss %g:\n", cfg.target_loss);
    int place = 0;
    for (const Row* w : order_j) {
      const auto& t = w->target;
      ranking.push_back(w->name);
      if (rank(w) == 2) {
        std::fprintf(g_out, "  -  %-12s not reached: %s\n", w->name.c_str(),
                     t.value("reason", std::string("no target in summary.json")).c_str());
        continue;
      }
      std::fprintf(g_out, "  %d. %-12s %s J%s at step %lld, %.1f s\n", ++place, w->name.c_str(),
                   fmt_or_unknown(joules_to_target(*w), "{:.4g}", 0).c_str(),
                   t.value("energy_estimated", false) ? " (estimated)" : "",
                   (long long)t.value("step", int64_t(0)),
                   t["seconds"].is_number() ? t["seconds"].get<double>() : NAN);
    }
  }
  nlohmann::ordered_json doc;
  doc["config"] = gt::bytes_to_json(a.config);  // a Linux path: any bytes (issue 31 §1)
  doc["steps"] = a.steps;
  doc["memory_budget_bytes"] = budget;
  doc["order"] = order;
  doc["energy_estimated"] = est;
  doc["rows"] = js;
  doc["combined_factor"] = known ? json_of(combined) : nlohmann::ordered_json();
  doc["combined_speedup"] = speed;
  doc["claimed_combined"] = claimed_cum;
  if (args.has_target) {
    doc["target_loss"] = cfg.target_loss;
    doc["ranking_by_joules_to_target"] = ranking;
  }
  // temporary name, then rename; a failure names the file (never a half-written table)
  gt::write_file_atomic((fs::path(a.out) / "ablation.csv").string(), csv);
  gt::write_file_atomic((fs::path(a.out) / "ablation.json").string(), gt::dump_json(doc, 2) + "\n");
  if (!a.json.empty()) {
    nlohmann::json out = nlohmann::json::parse(gt::dump_json(doc));
    out["schema"] = "greentrain.ablate/1";
    out["out"] = gt::bytes_to_json(a.out);
    gt::cli::write_json_output(a.json, out);
  }
  std::fprintf(g_out, "wrote %s and %s\n", (fs::path(a.out) / "ablation.csv").c_str(),
               (fs::path(a.out) / "ablation.json").c_str());
#ifdef GT_HAVE_REPORT
  try {
    const auto rep = gt::report::write_report({a.out}, (fs::path(a.out) / "report.html").string());
    std::fprintf(g_out, "wrote %s\n", rep.path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(g_out, "report not written: %s\n", e.what());
  }
#endif
  return 0;
}

void setup(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "ablate", "Measure what bf16, kernel fusion and recomputation give (co-design ablation)");
  sub->add_option("config", args->config, "TOML configuration (configs/*.toml)")->required();
  sub->add_option("--data", args->data, "Data file (overrides data.path)");
  sub->add_option("--steps", args->steps, "Optimizer steps per row (default 200)");
  sub->add_option("--rounds", args->rounds,
                  "Interleave the rows in R rounds of steps/R steps each, every row resuming its "
                  "checkpoint, so the machine's drift hits all rows alike (default 1: one row "
                  "after another)");
  sub->add_option("--memory-budget", args->memory_budget,
                  "Bytes the plan may take (default: the baseline's plan at train.batch_size)");
  sub->add_option("--out", args->out, "Folder for the rows' runs, ablation.csv and .json");
  sub->add_option("--order", args->order,
                  "Techniques in the order they are switched on (default bf16,fusion,recompute)");
  sub->add_option("--recompute", args->recompute,
                  "Policy of the recompute row: gelu, gelu+ln or block (default block)");
  sub->add_option("--set", args->sets, "Override a key for every row (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  gt::cli::add_json_option(sub, args->json, "the ablation table (ablation.json's content)");
  sub->callback([args] {
    g_out = gt::cli::human_out(args->json);
    gt::cli::exit_code() = run_ablate(*args);
  });
}

gt::cli::Registrar reg(45, "ablate", setup);

}  // namespace
