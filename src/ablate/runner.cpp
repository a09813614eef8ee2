// ablate/runner.cpp: running and reading the rows (ablate/runner.h).
#include "ablate/runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "core/process.h"
#include "run/metrics_jsonl.h"
#include "run/schema.h"

namespace fs = std::filesystem;

namespace gt::ablate {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

long long last_logged_step(const fs::path& metrics) {
  std::ifstream f(metrics, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  return run::last_logged_step(text.str());  // -1 while the last line is being written
}

fs::path row_folder(const Options& opt, const Plan& plan, size_t i) {
  return fs::path(opt.out) / fmt::format("{}_{}", i, plan.rows[i].name);
}

void prepare_out_folder(const Options& opt) {
  std::error_code ec;
  if (fs::exists(opt.out, ec) && !fs::is_directory(opt.out, ec))
    throw Error(
        fmt::format("--out {}: not a folder; expected a folder for the ablation's runs", opt.out));
  if (!opt.overwrite && fs::exists(opt.out, ec)) {
    // an earlier ablation's table and rows would be replaced without a word (as train refuses
    // a folder with a checkpoint and prepare one that is not empty)
    std::vector<std::string> held;
    for (const auto& e : fs::directory_iterator(opt.out, ec)) {
      held.push_back(e.path().filename().string());
      if (held.size() == 3) break;
    }
    if (!held.empty())
      throw Error(fmt::format(
          "--out {}: the folder is not empty (it holds {}{}); an ablation owns its output folder "
          "(its rows' runs, ablation.csv and .json): expected an empty or new folder, or "
          "--overwrite to replace an earlier ablation's results",
          opt.out, fmt::join(held, ", "), held.size() == 3 ? ", ..." : ""));
  }
  fs::create_directories(opt.out);
  // rows of an earlier ablation in this folder would sit beside the new table: remove them
  const std::regex row_dir(R"([0-9]+_(baseline|\+[a-z0-9_]+)(\.log)?)");
  for (auto& e : fs::directory_iterator(opt.out))
    if (std::regex_match(e.path().filename().string(), row_dir)) fs::remove_all(e.path());
}

namespace {

// The progress of a running row, from its metrics.jsonl: on a terminal about every second (one
// line rewritten); otherwise a line at its first logged step and every 30 s.
class Progress {
 public:
  Progress(FILE* out, const std::string& name, fs::path metrics, int stop_at)
      : out_(out),
        name_(name),
        metrics_(std::move(metrics)),
        stop_at_(stop_at),
        tty_(isatty(fileno(out))) {}
  void operator()() {
    const auto now = std::chrono::steady_clock::now();
    const long long step = last_logged_step(metrics_);
    const bool due = tty_ ? now - last_shown_ >= std::chrono::seconds(1)
                          : step != shown_step_ &&
                                (shown_step_ < 0 || now - last_shown_ >= std::chrono::seconds(30));
    if (!due || (!tty_ && step < 0)) return;
    last_shown_ = now;
    shown_step_ = step;
    const double s = std::chrono::duration<double>(now - t0_).count();
    const std::string text =
        step < 0 ? fmt::format("    {}: starting, {:.0f} s", name_, s)
                 : fmt::format("    {}: step {} of {}, {:.0f} s", name_, step, stop_at_, s);
    std::fprintf(out_, tty_ ? "\r%-60s" : "%s\n", text.c_str());
    std::fflush(out_);
  }
  /// Clears the rewritten line on a terminal.
  void finish() const {
    if (tty_ && shown_step_ != -1) std::fprintf(out_, "\r%-60s\r", "");
  }

 private:
  FILE* out_;
  std::string name_;
  fs::path metrics_;
  int stop_at_;
  bool tty_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now(), last_shown_ = t0_;
  long long shown_step_ = -1;
};

// Runs steps (stop_at - previous stop] of one row as `greentrain train`: the first segment
// starts the run, later ones resume its checkpoint.
void run_segment(const Options& a, const Plan& plan, const RowPlan& row, const fs::path& dir,
                 int stop_at, bool first, FILE* out) {
  if (first) fs::remove_all(dir);
  std::vector<std::string> argv = train_arguments(a, plan, row, dir.string(), stop_at, first);
  argv.insert(argv.begin(), fs::read_symlink("/proc/self/exe").string());
  const fs::path log = dir.string() + ".log";
  std::fprintf(out,
               "  running %-12s (%s, fusion %s, recompute %s, micro-batch %d), steps to %d ...\n",
               row.name.c_str(), row.precision.c_str(), row.fusion.c_str(), row.recompute.c_str(),
               row.batch, stop_at);
  std::fflush(out);
  Progress progress(out, row.name, dir / run::file::metrics, stop_at);
  int status = 0;
  {
    ChildProcess child(argv, {.output_path = log.string(),
                              .append_output = !first,
                              .forward = {SIGINT, SIGTERM},
                              .who = "greentrain ablate"});
    child.wait_ended(std::ref(progress));
    status = child.reap();
  }
  progress.finish();
  if (WIFSIGNALED(status) ||
      (WIFEXITED(status) && (WEXITSTATUS(status) == 130 || WEXITSTATUS(status) == 143)))
    throw Error(fmt::format("row '{}' was interrupted (its checkpoint is in {}); see {}", row.name,
                            dir.string(), log.string()));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(fmt::format("row '{}' failed (exit code {}); see {}", row.name,
                            WIFEXITED(status) ? WEXITSTATUS(status) : -1, log.string()));
  // memory is the fresh run's: a resumed segment also holds the checkpoint it reads
  if (first)
    fs::copy_file(dir / run::file::summary, dir / "summary.first.json",
                  fs::copy_options::overwrite_existing);
}

}  // namespace

std::vector<Measured> run_rows(const Options& a, const Plan& plan, FILE* out) {
  std::vector<int> starts;
  for (int r = 0; r < a.rounds; ++r) {
    const int from = (int)((int64_t)a.steps * r / a.rounds),
              to = (int)((int64_t)a.steps * (r + 1) / a.rounds);
    starts.push_back(from + 1);
    if (a.rounds > 1)
      std::fprintf(out, "round %d of %d: steps %d to %d of every row\n", r + 1, a.rounds, from + 1,
                   to);
    for (size_t i = 0; i < plan.rows.size(); ++i)
      run_segment(a, plan, plan.rows[i], row_folder(a, plan, i), to, r == 0, out);
  }
  std::vector<Measured> measured;
  for (size_t i = 0; i < plan.rows.size(); ++i)
    measured.push_back(read_row(row_folder(a, plan, i), starts));
  return measured;
}

}  // namespace gt::ablate
