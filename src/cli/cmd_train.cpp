// greentrain train: trains a GPT on text or token shards (train/trainer.h does the work).
#include <fmt/format.h>
#ifdef GT_HAVE_OPENMP
#include <omp.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "cli/command.h"
#include "core/error.h"
#include "dist/mpi_comm.h"
#include "run/schema.h"
#include "run/writer.h"
#include "train/checkpoint.h"
#include "train/energy_hook.h"
#include "train/power_limit_policy.h"
#include "train/resume_plan.h"
#include "train/run_summary.h"
#include "train/trainer.h"
#ifdef GT_HAVE_REPORT
#include "report/report.h"
#endif

namespace fs = std::filesystem;

// the command's own names, apart from the other command files' in a unity batch
namespace gt_cmd_train {
namespace {

// The OpenMP threads the CPU backend runs on (1 in a build without OpenMP: GT_ONEDNN=OFF).
int host_threads() {
#ifdef GT_HAVE_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// ", adaptive (...)" or ", fixed", after the thread count; empty for a backend without threads.
std::string thread_policy_text(const gt::Backend& be) {
  const auto p = be.thread_policy();
  if (!p) return "";
  if (p->policy == "fixed") return " (train.thread_policy = fixed)";
  return " (adaptive: fewer, or sleeping waits, while other work takes the cores; "
         "train.thread_policy)";
}

// The header's "products" line: "fp32 on oneDNN (instruction set avx512_core_bf16)", "bf16 on
// own AVX512_BF16 where it takes them (...), else oneDNN (...)", or "bf16 EMULATED (<why>)".
std::string product_path_text(const gt::ProductPath& p) {
  if (p.emulated) return p.precision + " EMULATED (" + p.emulated_reason + ")";
  const std::string onednn = "oneDNN (instruction set " + p.isa + ")";
  if (p.kernel == "oneDNN") return p.precision + " on " + onednn;
  return p.precision + " on " + p.kernel + " where it takes them, else " + onednn;
}

struct Args {
  std::string config;
  std::vector<std::string> sets;
  std::string data, out, init_from;
  bool resume = false;
  bool allow_data_change = false;
  int64_t stop_at = 0;
};

// Removes what a failed start created in the run folder, unless disarmed.
class StartCleanup {
 public:
  StartCleanup(std::string dir, bool resume) : dir_(std::move(dir)), armed_(!resume) {
    std::error_code ec;
    existed_ = fs::exists(dir_, ec);
    had_config_ = fs::exists(fs::path(dir_) / "config.toml", ec);
  }
  ~StartCleanup() {
    if (!armed_) return;
    std::error_code ec;
    if (!existed_)
      fs::remove_all(dir_, ec);
    else if (!had_config_)
      fs::remove(fs::path(dir_) / "config.toml", ec);
  }
  StartCleanup(const StartCleanup&) = delete;
  StartCleanup& operator=(const StartCleanup&) = delete;
  void disarm() { armed_ = false; }

 private:
  std::string dir_;
  bool armed_ = true, existed_ = false, had_config_ = false;
};

// A resumed run keeps its model's shape: a --set model.* that changes it is refused by name
// (the checkpoint's weights would not load, with a message about tensors instead).
void check_model_kept(const gt::GPTConfig& saved, const gt::GPTConfig& now,
                      const std::string& out) {
  const std::pair<const char*, std::pair<int, int>> keys[] = {
      {"n_layer", {saved.n_layer, now.n_layer}},
      {"n_head", {saved.n_head, now.n_head}},
      {"n_embd", {saved.n_embd, now.n_embd}},
      {"block_size", {saved.block_size, now.block_size}},
      {"vocab_size", {saved.vocab_size, now.vocab_size}}};
  for (const auto& [key, v] : keys)
    if (v.first != v.second)
      throw gt::Error(fmt::format(
          "--set model.{}={}: a resumed run keeps its model's shape (the checkpoint in {} has "
          "model.{} = {}); a model of another shape is a new run (another --out)",
          key, v.second, out, key, v.first));
}

// A resumed run keeps its learning-rate schedule. With train.lr_decay_steps = 0 the cosine
// decay ends at train.max_steps, so a resume that raises max_steps (the way to train on) would
// move the decay's end and make the rate jump back up at the resumed step. Unless the command
// line sets train.lr_decay_steps, the decay keeps the checkpoint's end (its max_steps), said;
// the steps past it run at train.min_lr. `saved`: the checkpoint's configuration.
void keep_decay_horizon(const std::vector<std::string>& sets, const gt::TrainConfig& saved,
                        gt::TrainConfig& cfg, bool quiet = false) {
  if (saved.lr_decay_steps != 0 || cfg.lr_decay_steps != 0 || cfg.max_steps == saved.max_steps)
    return;
  for (const auto& s : sets)
    if (s.rfind("train.lr_decay_steps=", 0) == 0) return;  // set to 0 on purpose: max_steps'
  cfg.lr_decay_steps = static_cast<int>(saved.max_steps);
  if (!quiet)
    std::printf(
        "note: train.max_steps %lld -> %lld: the learning rate keeps the checkpoint's schedule, "
        "its cosine decay ending at step %lld (train.lr_decay_steps = %lld, recorded in the "
        "checkpoint; the steps after it run at train.min_lr = %g); --set "
        "train.lr_decay_steps=%lld decays over the new length instead (the rate then jumps at "
        "the resumed step)\n",
        (long long)saved.max_steps, (long long)cfg.max_steps, (long long)saved.max_steps,
        (long long)saved.max_steps, cfg.min_lr, (long long)cfg.max_steps);
}

// The run's sessions before this one, read as it starts (before this session marks itself
// open): summary.json's run_totals go on from them, the checkpoints record the run's tokens and
// this session's number, and the time to the target counts the earlier sessions' wall time.
// An earlier session that is not accounted for (killed without its summary.json) is said now.
void account_earlier_sessions(gt::Trainer& trainer, gt::RunSummaryWriter& summary,
                              const std::string& out, bool resume,
                              std::chrono::steady_clock::time_point session_start) {
  namespace key = gt::run::key;
  if (!resume) {  // a fresh run: session 1 from step 0
    trainer.set_run_record(1, 0, 0);
    trainer.set_wall_clock(session_start, 0.0);
    summary.set_prior(std::nullopt);
    return;
  }
  std::string note;
  const nlohmann::json prior =
      gt::run::read_prior_sessions(out, trainer.step(), trainer.resumed_run_record(), &note);
  if (!note.empty()) std::printf("note: the run's totals: %s\n", note.c_str());
  const nlohmann::json& t = prior[key::run_totals];
  auto integer = [&](const char* k) {
    return t.contains(k) && t[k].is_number_integer() ? std::optional<int64_t>(t[k].get<int64_t>())
                                                     : std::nullopt;
  };
  const auto sessions = integer(key::sessions);
  trainer.set_run_record(sessions ? std::optional<int64_t>(*sessions + 1) : std::nullopt,
                         integer(key::first_step), integer(key::tokens));
  trainer.set_wall_clock(session_start, t.contains(key::wall_s) && t[key::wall_s].is_number()
                                            ? std::optional<double>(t[key::wall_s].get<double>())
                                            : std::nullopt);
  summary.set_prior(prior);
}

int run_train(const Args& a, gt::dist::MpiRuntime* mpi) {
  const auto session_start = std::chrono::steady_clock::now();  // summary.json's wall_s
  const int rank = mpi ? mpi->rank() : 0, ranks = mpi ? mpi->size() : 1;
  gt::TrainConfig cfg;
  std::string out = a.out;
  // CONFIG --out RUN --resume: continue RUN if it holds a checkpoint, else start it from CONFIG.
  // One command line then serves every run of an interruptible Slurm job (sched/slurm.h), the
  // first included.
  bool resume = a.resume;
  if (resume && !a.config.empty() && !out.empty() && !gt::has_checkpoint(out)) {
    std::printf("greentrain train: %s holds no checkpoint yet: starting it from %s\n", out.c_str(),
                a.config.c_str());
    resume = false;
  }
  int64_t checkpoint_step = -1;
  if (resume) {
    if (out.empty()) throw gt::UsageError("--resume needs --out RUN_DIR (the run to continue)");
    gt::CheckpointState st = gt::load_checkpoint_state(out);
    gt::load_config_string(st.config_toml, gt::checkpoint_dir(out) + "/state.json", cfg);
    checkpoint_step = st.step;
    if (!a.config.empty() && rank == 0)
      std::printf(
          "greentrain train: %s holds a checkpoint: %s is not read; the checkpoint's "
          "configuration continues (--set changes it)\n",
          out.c_str(), a.config.c_str());
  } else {
    if (a.config.empty())
      throw gt::UsageError("a configuration file is needed, e.g. configs/quickstart.toml");
    gt::load_config_file(a.config, cfg);
    if (out.empty()) out = (fs::path("runs") / fs::path(a.config).stem()).string();
    if (gt::has_checkpoint(out))
      throw gt::Error(
          fmt::format("{} already holds a checkpoint; pass --resume to continue it or "
                      "--out to start a new run elsewhere",
                      out));
  }
  const gt::TrainConfig saved = cfg;  // the checkpoint's, on a resume
  gt::apply_overrides(a.sets, cfg);
  if (resume) check_model_kept(saved.model, cfg.model, out);
  if (resume) keep_decay_horizon(a.sets, saved, cfg, /*quiet=*/rank != 0);
  if (!a.data.empty()) cfg.data_path = a.data;
  if (!a.init_from.empty()) cfg.init_from = a.init_from;
  cfg.validate();
  if (resume) {
    // before anything is loaded or written: a max_steps below the checkpoint is an error; at
    // it, the run is complete and its results (summary.json, report.html) stay as they are
    gt::check_resume_steps(cfg.max_steps, checkpoint_step, out);
    if (cfg.max_steps == checkpoint_step) {
      std::printf(
          "greentrain train: %s is at step %lld = train.max_steps: nothing to train (its "
          "summary.json and report.html are kept); raise train.max_steps (--set "
          "train.max_steps=N) to train on\n",
          out.c_str(), (long long)checkpoint_step);
      return 0;
    }
  }
  // Every input is checked before the data is loaded (which may take minutes): the carbon
  // file is read here, with the meter's other options.
  gt::energy::MeterOptions meter_opt = gt::meter_options(cfg);
  // an intensity in another unit than gCO2e/kWh (kg/kWh read as g/kWh): said once, by rank 0
  if (rank == 0)
    for (const auto& w : meter_opt.carbon.warnings())
      std::fprintf(stderr, "greentrain train: warning: %s\n", w.c_str());
  // with several ranks, local rank 0 of each node reads its node-wide devices (where the
  // launcher gives no local rank: the first rank to take their locks), every rank its own GPU;
  // the job's figures are their sum (EnergyHook)
  const std::optional<int> local_rank = gt::dist::local_rank_if_set();
  meter_opt.node_devices_elsewhere = ranks > 1 && local_rank && *local_rank != 0;
  meter_opt.node_devices_shared = ranks > 1 && !local_rank;
  // Some inputs can only be checked once the trainer exists (the power-limit devices, the energy
  // sensors and carbon data): a start that fails leaves no run folder (or, in a folder that
  // existed, no config.toml) behind. Disarmed once training begins.
  StartCleanup cleanup(out, resume || rank != 0);  // rank 0 makes the run folder
  if (rank == 0 && !resume) {  // before the data is loaded: an --out that cannot be made says so
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec)
      throw gt::Error(
          fmt::format("--out {}: cannot create the run folder there: {}", out, ec.message()));
  }
  std::unique_ptr<gt::dist::Communicator> comm;
  if (ranks > 1) comm = gt::dist::make_mpi_communicator(cfg.dist_timeout_s);
  gt::Trainer trainer(cfg, out, resume, rank == 0 ? stdout : nullptr, a.allow_data_change,
                      comm.get());
  const auto& c = trainer.config();
  const auto mem = trainer.model().memory();
  std::printf("greentrain train: %s\n", out.c_str());
  std::printf(
      "  model    GPT %d layers, %d heads, %d wide, context %d, vocabulary %d: %.2fM "
      "parameters\n",
      c.model.n_layer, c.model.n_head, c.model.n_embd, c.model.block_size, c.model.vocab_size,
      gt::gpt_num_params(c.model) / 1e6);
  std::printf("  data     %s (%s, %s tokens): %zu train / %zu validation tokens\n",
              c.data_path.c_str(), c.data_format.c_str(), trainer.data().tokenizer.kind.c_str(),
              trainer.data().train.size(), trainer.data().val.size());
  std::printf(
      "  batch    %d x %d tokens x %d accumulation x %d ranks = %lld tokens/step, %s, %s, %d "
      "threads%s\n",
      c.batch_size, c.model.block_size, c.grad_accum_steps, ranks,
      (long long)c.batch_size * c.model.block_size * c.grad_accum_steps * ranks,
      gt::to_string(c.precision).c_str(), trainer.backend().name().c_str(), host_threads(),
      thread_policy_text(trainer.backend()).c_str());
  if (const auto p = trainer.backend().product_path())
    std::printf("  products %s\n", product_path_text(*p).c_str());
  if (ranks > 1)
    std::printf(
        "  dist     %d ranks over MPI, gradients in %s, zero=%d, collective time-out %g s\n", ranks,
        c.grad_comm.c_str(), c.zero, c.dist_timeout_s);
  std::printf(
      "  memory   %s planned: parameters %s, gradients %s, AdamW %s, activations %s "
      "(recompute %s), scratch %s, workspace %s; + %s held before allocation\n",
      gt::format_bytes(mem.total()).c_str(), gt::format_bytes(mem.params_bytes).c_str(),
      gt::format_bytes(mem.grads_bytes).c_str(), gt::format_bytes(mem.optimizer_bytes).c_str(),
      gt::format_bytes(mem.activations_bytes).c_str(), gt::to_string(c.recompute).c_str(),
      gt::format_bytes(mem.scratch_bytes).c_str(), gt::format_bytes(mem.workspace_bytes).c_str(),
      gt::format_bytes(trainer.runtime_bytes()).c_str());
  if (resume) std::printf("  resumed  from step %lld\n", (long long)trainer.step());
  std::fflush(stdout);
  // train.power_limit, once per node: applied, or the run goes on uncapped and says why
  const gt::RunPowerLimit power(c, gt::dist::local_rank_from_env() == 0, stdout);
  // one reader per device per node (node lock): rank 0 takes its node's devices first, so that
  // its progress lines show them
  if (comm && rank != 0) comm->barrier();
  gt::EnergyHook energy(c, out, rank == 0 ? stdout : nullptr, meter_opt);
  if (comm && rank == 0) comm->barrier();
  energy.set_communicator(comm.get());
  trainer.set_observer(&energy);
  gt::RunSummaryWriter summary(trainer, out);
  summary.set_session_start(session_start);
  if (rank == 0) account_earlier_sessions(trainer, summary, out, resume, session_start);
  summary.set_extra([&](nlohmann::json& s) {
    energy.finish(s);
    if (!power.record().is_null()) s[gt::run::key::power_limit] = power.record();
  });
  cleanup.disarm();
  // while it trains, the run folder says a session is open: one killed before its summary.json
  // is then known to the next resume (run/schema.h session_open.json)
  if (rank == 0) {
    const nlohmann::json& rec = trainer.state_record().run;
    gt::run::open_session(out,
                          rec[gt::run::key::session].is_number()
                              ? std::optional<int64_t>(rec[gt::run::key::session].get<int64_t>())
                              : std::nullopt,
                          trainer.step());
  }
  gt::RunResult r = trainer.run(a.stop_at);
  const int exit_code = r.interrupted_by ? 128 + r.interrupted_by : 0;
  if (rank != 0) {  // the energy totals are collective; rank 0 writes them
    nlohmann::json unused;
    energy.finish(unused);
    // rank 0 has written and flushed everything by this barrier: a rank that exited first
    // (srun --kill-on-bad-exit counts 143 as bad) could get rank 0 killed with its last lines
    // still in stdio's buffer
    comm->barrier();
    return exit_code;
  }
  summary.finish(r);
#ifdef GT_HAVE_REPORT
  // every run ends with its report, an interrupted one too; a failure here loses no result
  try {
    const auto rep = gt::report::write_report({out}, (fs::path(out) / "report.html").string());
    std::printf("report   %s%s\n", rep.path.c_str(),
                rep.charts ? "" : " (tables only: Chart.js, Debian's libjs-chart.js, not found)");
  } catch (const std::exception& e) {
    std::printf("report   not written: %s\n", e.what());
  }
#endif
  if (r.interrupted_by)
    std::printf("stopped at step %lld; continue with: greentrain train --out %s --resume\n",
                (long long)r.step, out.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  if (comm) comm->barrier();
  return exit_code;
}

void setup(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("train", "Train a GPT on text or token shards");
  sub->add_option("config", args->config,
                  "TOML configuration (configs/*.toml); not needed with --resume");
  sub->add_option("--set", args->sets,
                  "Override a key, e.g. --set train.max_steps=100 (repeatable; before or after "
                  "CONFIG)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  sub->add_option("--data", args->data, "Data file (overrides data.path)");
  sub->add_option("--out", args->out, "Run folder (default runs/<config name>)");
  sub->add_option("--init-from", args->init_from,
                  "Start from a Hugging Face GPT-2 folder (config.json, model.safetensors, "
                  "vocab.json + merges.txt): its shapes, tokenizer and weights (train.init_from)")
      ->type_name("DIR");
  sub->add_flag("--resume", args->resume,
                "Continue the run in --out from its checkpoint (with CONFIG: start it from CONFIG "
                "when --out holds no checkpoint yet)");
  sub->add_flag("--allow-data-change", args->allow_data_change,
                "With --resume: go on with data or a tokenizer other than the checkpoint's (the "
                "data position restarts; the change is noted in metrics.jsonl)");
  sub->add_option("--stop-at", args->stop_at,
                  "Stop after this step (saving a checkpoint) without changing the schedule")
      ->check(
          [](const std::string& v) {
            long long n = 0;
            size_t at = v.find_first_not_of(' ');  // " 3" and "+3", as CLI11 takes them
            if (at != std::string::npos && v[at] == '+') ++at;
            const char* b = v.data() + std::min(at, v.size());
            auto [end, ec] = std::from_chars(b, v.data() + v.size(), n);
            return ec == std::errc() && end == v.data() + v.size() && n >= 1
                       ? std::string()
                       : fmt::format("expected a step number >= 1, got '{}'", v);
          },
          "STEP >= 1");
  sub->callback([args] {
    // several ranks (mpirun, srun --mpi=pmix): MPI for the whole command; rank 0 prints
    std::unique_ptr<gt::dist::MpiRuntime> mpi;
    if (gt::dist::launched_by_mpi()) {
      mpi = std::make_unique<gt::dist::MpiRuntime>();
      if (mpi->size() == 1) mpi.reset();
    }
    if (mpi && mpi->rank() != 0) std::freopen("/dev/null", "w", stdout);
    try {
      gt::cli::exit_code() = run_train(*args, mpi.get());
    } catch (const std::exception& e) {
      if (!mpi) throw;
      // the other ranks may wait in a collective for this one: end the whole job
      std::fprintf(stderr, "greentrain: error: rank %d of %d: %s\n", mpi->rank(), mpi->size(),
                   e.what());
      gt::dist::MpiRuntime::abort(dynamic_cast<const gt::UsageError*>(&e) ? gt::cli::kUsageExit
                                                                          : 1);
    }
  });
}

gt::cli::Registrar reg(10, "train", setup);

}  // namespace
}  // namespace gt_cmd_train
