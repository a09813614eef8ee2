#include "train/trainer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backend/profiling.h"
#include "core/error.h"
#include "core/parse.h"
#include "dist/mpi_comm.h"
#include "run/schema.h"
#include "run/writer.h"
#include "train/checkpoint.h"
#include "train/hf_gpt2.h"
#include "train/model_memory.h"

namespace fs = std::filesystem;

namespace gt {
namespace {

std::atomic<int> g_stop_signal{0};
std::atomic<pid_t> g_trainer_pid{0};
// The signals that end a run with a checkpoint: Ctrl-C, kill, a closed terminal, Slurm's
// `--signal=USR1@N` / `USR2@N` warnings before the time limit, a closed output pipe. Left at
// their default, each would end the process with the steps since the last checkpoint lost.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE};
constexpr int kNumStopSignals = sizeof kStopSignals / sizeof kStopSignals[0];
extern "C" void on_stop_signal(int sig) {
  if (::getpid() != g_trainer_pid.load()) {
    // A forked child inherited the handler: the checkpoint is its parent's business; the
    // signal does to the child what it would have done without greentrain.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  g_stop_signal.store(sig);
}

// Installs on_stop_signal for the stop signals, and restores the handlers that were there on
// every way out of the scope, an error included.
class StopSignalHandlers {
 public:
  StopSignalHandlers() {
    g_stop_signal.store(0);
    g_trainer_pid.store(::getpid());
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < kNumStopSignals; ++i) sigaction(kStopSignals[i], &sa, &old_[i]);
  }
  ~StopSignalHandlers() {
    for (int i = 0; i < kNumStopSignals; ++i) sigaction(kStopSignals[i], &old_[i], nullptr);
  }
  StopSignalHandlers(const StopSignalHandlers&) = delete;
  StopSignalHandlers& operator=(const StopSignalHandlers&) = delete;

 private:
  struct sigaction old_[kNumStopSignals] {};
};

// An inf or NaN as the messages print it ("NaN", not fmt's "-nan").
std::string show(double x) { return std::isnan(x) ? std::string("NaN") : fmt::format("{}", x); }

}  // namespace

double learning_rate_at(const TrainConfig& cfg, int64_t it) {
  const int64_t warmup = cfg.warmup_steps;
  const int64_t decay = cfg.lr_decay_steps > 0 ? cfg.lr_decay_steps : cfg.max_steps;
  if (it < warmup) return cfg.learning_rate * (it + 1) / (warmup + 1);
  if (it > decay || decay <= warmup) return cfg.min_lr;
  double ratio = double(it - warmup) / double(decay - warmup);
  double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return cfg.min_lr + coeff * (cfg.learning_rate - cfg.min_lr);
}

// A "Key:   N kB" line of /proc/self/status, in bytes; 0 when absent. A value that is not a
// number is reported once (naming the line) and read as 0, so memory accounting never stops a
// run.
size_t status_kb_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  const std::string k = std::string(key) + ":";
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(k, 0) != 0) continue;
    std::string v = line.substr(k.size());
    if (auto kb = v.rfind("kB"); kb != std::string::npos) v.erase(kb);
    std::string err;
    if (auto n = try_parse_number<unsigned long long>(v, std::string("/proc/self/status: ") + key,
                                                      "a size in kB", &err))
      return static_cast<size_t>(*n) * 1024;
    static bool said = false;
    if (!said) std::fprintf(stderr, "greentrain: warning: %s\n", err.c_str());
    said = true;
    return 0;
  }
  return 0;
}

size_t current_rss_bytes() { return status_kb_bytes("VmRSS"); }

size_t peak_rss_bytes() { return status_kb_bytes("VmHWM"); }

Trainer::Trainer(const TrainConfig& cfg, const std::string& run_dir, bool resume, FILE* log,
                 bool allow_data_change, dist::Communicator* comm)
    : cfg_(cfg), run_dir_(run_dir), log_(log), comm_(comm) {
  cfg_.validate();
  // a Hugging Face GPT-2 folder's shapes and tokenizer (its weights are loaded below)
  if (!cfg_.init_from.empty() && !resume)
    apply_hf_gpt2_config(cfg_.init_from, cfg_, log_, "--init-from " + cfg_.init_from);
  if (comm_ && comm_->size() > 1) {
    rank_ = comm_->rank();
    world_ = comm_->size();
    // one device per rank of a node, where its traits say so (device_for_local_rank)
    cfg_.device = device_for_local_rank(cfg_.device, dist::local_rank_from_env());
  }
  backend_ = make_backend(cfg_.device, backend_options(cfg_));
  if (const char* prof = std::getenv("GT_PROFILE"); prof && *prof && std::string(prof) != "0")
    backend_ = make_profiling_backend(std::move(backend_), std::string(prof) == "shapes");
  backend_->set_precision(cfg_.precision);
  scaler_ = GradScaler(cfg_.precision == Precision::fp16);
  // the checkpoint's record, reconciled with this run's configuration, and the data it reads
  ResumePlan plan = plan_resume(cfg_, run_dir, resume, world_, log_, allow_data_change);
  data_ = load_resumed_data(cfg_, plan);
  data_id_ = data_identity(cfg_, data_);
  val_bytes_per_token_ = eval_bytes_per_token(data_.tokenizer, data_.val, cfg_.batch_size,
                                              cfg_.model.block_size, cfg_.eval_steps);
  check_resume_data(plan, data_id_, allow_data_change);
  int v = data_.tokenizer.vocab_size();
  if (cfg_.model.vocab_size == 0) cfg_.model.vocab_size = v;
  if (cfg_.model.vocab_size < v)
    throw Error(fmt::format("model.vocab_size = {} is smaller than the tokenizer's {} tokens",
                            cfg_.model.vocab_size, v));
  account_runtime_memory();
  if (cfg_.memory_budget > 0 && !resume) fit_batch_to_memory_budget();
  try {
    model_ = make_gpt(cfg_, cfg_.batch_size, "train.batch_size", *backend_, /*training=*/true);
  } catch (const Error& e) {
    if (cfg_.memory_budget <= 0 || resume) throw;
    throw Error(fmt::format("train.memory_budget = {} bytes chose micro-batch {}: {}",
                            cfg_.memory_budget, cfg_.batch_size, e.what()));
  }
  m_ = std::make_unique<Arena>("adamw.exp_avg");
  v_ = std::make_unique<Arena>("adamw.exp_avg_sq");
  const StepContext ctx{*backend_, *model_, cfg_, *m_, *v_};
  strategy_ = world_ > 1 ? make_data_parallel(ctx, *comm_) : make_single_process(ctx);
  plan_step_graph();
  sampler_ = std::make_unique<BatchSampler>(data_.train, cfg_.batch_size, cfg_.model.block_size,
                                            static_cast<uint64_t>(cfg_.seed));
  inputs_.resize((size_t)cfg_.batch_size * cfg_.model.block_size);
  targets_.resize(inputs_.size());
  start_from(plan);
}

void Trainer::account_runtime_memory() {
  // what the process holds before the model: code, libraries, the loaded data. Loading
  // (tokenizing) peaks above that and frees it again; that peak is kept apart, and the high-
  // water mark is reset (Linux clear_refs 5) so the reported peak is the training phase's.
  load_peak_bytes_ = peak_rss_bytes();
  {
    std::ofstream clear("/proc/self/clear_refs");
    if (clear) clear << "5";
  }
  runtime_bytes_ = current_rss_bytes();
}

void Trainer::fit_batch_to_memory_budget() {
  const auto rc = cfg_.recompute;
  const auto prec = cfg_.precision;
  int b = largest_batch_that_fits(cfg_.model, rc, cfg_.fusion, prec,
                                  static_cast<size_t>(cfg_.memory_budget), *backend_);
  if (b == 0)
    throw Error(fmt::format(
        "train.memory_budget = {} bytes: not even a micro-batch of 1 fits ({} bytes planned)",
        cfg_.memory_budget, plan_memory(cfg_.model, 1, rc, cfg_.fusion, prec, *backend_).total()));
  // no larger than the number of distinct windows in the training data
  const int64_t windows = (int64_t)data_.train.size() - cfg_.model.block_size;
  if (windows >= 1 && b > windows) b = static_cast<int>(windows);
  cfg_.batch_size = b;
}

void Trainer::start_from(const ResumePlan& plan) {
  if (rank_ == 0) {
    fs::create_directories(run_dir_);
    // a writer killed mid-save (SIGKILL) left its temporary folder, never read again
    const std::string removed = remove_stale_checkpoint_temporaries(run_dir_);
    if (!removed.empty() && log_) std::fprintf(log_, "note: %s\n", removed.c_str());
  }
  if (const std::optional<CheckpointState>& st = plan.state) {
    strategy_->load_checkpoint(run_dir_);
    backend_->weights_updated();
    if (scaler_.enabled())
      scaler_.restore(st->loss_scale, st->scaler_clean_steps, st->skipped_steps);
    step_ = saved_step_ = session_start_step_ = st->step;
    resumed_run_ = st->run;
    // unknown until set_run_record and set_wall_clock say what came before
    run_session_ = run_first_step_ = tokens_before_ = std::nullopt;
    earlier_wall_s_ = std::nullopt;
    last_loss_ = st->last_loss;
    if (plan.data_note.empty()) sampler_->restore(st->data_epoch, st->data_cursor);
    // only the metrics lines of steps up to here are kept: the resumed run re-does the rest
    if (rank_ == 0) run::keep_metrics_up_to(run_dir_, step_);
    if (!plan.data_note.empty() && rank_ == 0) {  // said, and kept with the run's record
      if (log_) std::fprintf(log_, "note: %s\n", plan.data_note.c_str());
      nlohmann::ordered_json rec;
      rec[run::key::step] = step_;
      rec[run::key::note] = plan.data_note;
      rec[run::key::data_was] = st->data;
      rec[run::key::data_now] = data_id_;
      run::MetricsLog(run_dir_).append(rec);
    }
  } else if (!cfg_.init_from.empty()) {
    load_parameters((fs::path(cfg_.init_from) / "model.safetensors").string(), *model_);
    backend_->weights_updated();
    run::remove_metrics(run_dir_);
  } else {
    model_->init_weights(static_cast<uint64_t>(cfg_.seed));
    if (rank_ == 0) run::remove_metrics(run_dir_);
  }
  if (rank_ == 0) run::write_config(run_dir_, cfg_.to_toml());
  // The checkpoint's record is made once now: one that could not be written stops the run
  // before its first step, never after the training it would have saved.
  if (rank_ == 0)
    (void)checkpoint_state_json(state_record(), checkpoint_dir(run_dir_) + "/state.json");
}

Trainer::~Trainer() = default;

Error Trainer::nonfinite_error(int64_t step, const std::string& what) const {
  return Error(fmt::format(
      "step {}: {}; the run stops here with nothing saved: {} (lower train.learning_rate, "
      "set train.grad_clip, or check the data)",
      step, what,
      saved_step_ >= 0 ? fmt::format("the checkpoint of step {} in {} is left as it was",
                                     saved_step_, checkpoint_dir(run_dir_))
                       : std::string("no checkpoint was written")));
}

void Trainer::plan_step_graph() {
  if (!backend_->supports_graphs()) return;
  if (!cfg_.cuda_graph)
    graph_.why_not = "train.cuda_graph = off";
  else if (world_ > 1)
    graph_.why_not =
        "data parallel: the gradient reduction runs on another thread during the backward";
  else if (!strategy_->losses_on_device())
    graph_.why_not = "train.fusion = off: that step reads results on the host between its ops";
  else
    graph_.use = true;
}

nlohmann::json Trainer::graph_summary() const {
  if (!backend_->supports_graphs()) return nullptr;
  const Backend::GraphStats st = backend_->graph_stats();
  nlohmann::json j;
  j["requested"] = cfg_.cuda_graph;
  j["used"] = st.launches > 0;
  j["why_not"] = graph_.why_not.empty() ? nlohmann::json() : nlohmann::json(graph_.why_not);
  j["launches"] = st.launches;
  j["instantiations"] = st.instantiations;
  j["updates"] = st.updates;
  return j;
}

void Trainer::set_step_rounding() {
  if (cfg_.stochastic_rounding)  // a seed per step: resume rounds as the run would
    backend_->set_stochastic_rounding(
        true, static_cast<uint64_t>(cfg_.seed) * 0x100000001B3ull + static_cast<uint64_t>(step_));
}

void Trainer::sample_micro_batch(int32_t* inputs, int32_t* targets) {
  // micro-batch j = micro * N + rank of the step's N x grad_accum_steps: the global batches do
  // not depend on the number of ranks
  const int B = cfg_.batch_size;
  sampler_->skip((int64_t)rank_ * B);
  sampler_->next(inputs, targets);
  sampler_->skip((int64_t)(world_ - 1 - rank_) * B);
}

float Trainer::step_dloss() const {
  // the mean over the global batch: every rank's micro-batches, summed by the reduction
  return static_cast<float>(scaler_.scale() / (double(cfg_.batch_size) * cfg_.model.block_size *
                                               cfg_.grad_accum_steps * world_));
}

double Trainer::train_step() {
  if (strategy_->losses_on_device()) return train_step_on_device();
  const int B = cfg_.batch_size, T = cfg_.model.block_size;
  model_->zero_grad();
  set_step_rounding();
  const float dloss = step_dloss();
  std::vector<double> losses;  // of this process's micro-batches
  for (int micro = 0; micro < cfg_.grad_accum_steps; ++micro) {
    sample_micro_batch(inputs_.data(), targets_.data());
    losses.push_back(model_->forward(inputs_.data(), targets_.data(), B, T));
    const bool last_micro = micro + 1 == cfg_.grad_accum_steps;
    if (last_micro) strategy_->begin_last_backward();
    model_->backward(dloss);
    if (last_micro) strategy_->end_last_backward();
  }
  // under fp16 the gradients are inf/NaN too and the loss scaler skips the step; with
  // several ranks the summed loss is checked, so that every rank stops together
  if (world_ == 1) check_training_losses(losses);
  double loss = 0.0;
  for (double l : losses) loss += l;
  loss = strategy_->reduce_step(loss, g_stop_signal);
  if (!std::isfinite(loss) && !scaler_.enabled())
    throw nonfinite_error(
        step_ + 1, fmt::format("the training loss (mean over {} ranks) is {}", world_, show(loss)));
  // AdamW's t counts the steps taken, not the ones skipped for inf/NaN gradients
  const float lr = static_cast<float>(learning_rate_at(cfg_, step_));
  const OptimizerResult opt = strategy_->optimizer_step(lr, optimizer_steps() + 1, scaler_.scale());
  return end_step(opt, loss);
}

double Trainer::train_step_on_device() {
  // One process with fusion on: the step talks to the device's host once, at its end (the
  // tokens go up through pinned memory, the losses and the update's result come back
  // asynchronously, the norm, the clip and the skip are decided on the device).
  const int B = cfg_.batch_size, T = cfg_.model.block_size, accum = cfg_.grad_accum_steps;
  const size_t N = size_t(B) * T;
  step_tokens_.resize(2 * N * accum);  // inputs then targets of each micro-batch
  for (int micro = 0; micro < accum; ++micro)
    sample_micro_batch(&step_tokens_[2 * N * micro], &step_tokens_[2 * N * micro + N]);
  const float dloss = step_dloss(), lr = static_cast<float>(learning_rate_at(cfg_, step_));
  const int64_t t = optimizer_steps() + 1;  // steps taken, not the ones skipped
  const double scale = scaler_.scale();
  auto queue = [&] {
    model_->zero_grad();
    set_step_rounding();
    for (int micro = 0; micro < accum; ++micro) {
      const int32_t* in = &step_tokens_[2 * N * micro];
      model_->forward_step(in, in + N, B, T, dloss, micro);
      const bool last_micro = micro + 1 == accum;
      if (last_micro) strategy_->begin_last_backward();
      model_->backward(dloss);
      if (last_micro) strategy_->end_last_backward();
    }
    strategy_->queue_optimizer_step(lr, t, scale);
  };
  if (graph_.use && graph_.steps >= 1)
    queue_as_graph(queue);
  else
    queue();
  ++graph_.steps;  // the first step of the process runs without a graph (warm-up)
  const OptimizerResult opt = strategy_->finish_optimizer_step(scale);
  std::vector<double> losses;  // read after the optimizer step's host synchronization
  for (int micro = 0; micro < accum; ++micro) losses.push_back(model_->step_loss(micro));
  check_training_losses(losses);
  double loss = 0.0;
  for (double l : losses) loss += l;
  return end_step(opt, loss);
}

void Trainer::queue_as_graph(const std::function<void()>& queue) {
  std::string why;
  try {
    backend_->begin_graph();
    queue();
    why = backend_->launch_graph();
  } catch (const std::exception& e) {
    backend_->abandon_graph();
    why = e.what();
  }
  if (why.empty()) return;
  // nothing of the capture ran: the step is queued again without a graph (an error of the
  // step itself, such as a bad token, is raised again there)
  graph_.use = false;
  graph_.why_not = fmt::format("the capture of step {} failed: {}", step_ + 1, why);
  queue();  // (said after it: an error of the step's own is raised there, without this line)
  if (log_)
    std::fprintf(log_, "greentrain: train.cuda_graph: %s; the run goes on without a graph\n",
                 graph_.why_not.c_str());
}

double Trainer::end_step(const OptimizerResult& opt, double loss) {
  loss /= cfg_.grad_accum_steps;
  if (opt.skipped && !scaler_.enabled())
    throw nonfinite_error(step_ + 1,
                          fmt::format("the gradient of '{}' holds inf or NaN (global norm {})",
                                      opt.nonfinite_tensor, show(opt.grad_norm)));
  if (!opt.skipped && opt.nonfinite_state != 0)  // the device raised it, or did not check
    if (std::string bad = strategy_->nonfinite_state(); !bad.empty())
      throw nonfinite_error(step_ + 1, bad + " became inf or NaN in the AdamW update");
  last_grad_norm_ = opt.grad_norm;
  last_skipped_ = opt.skipped;
  scaler_.update(opt.skipped);
  ++step_;
  last_loss_ = loss;
  return loss;
}

void Trainer::check_training_losses(const std::vector<double>& losses) const {
  if (scaler_.enabled()) return;  // the loss scaler skips such a step
  for (size_t i = 0; i < losses.size(); ++i)
    if (!std::isfinite(losses[i]))
      throw nonfinite_error(step_ + 1,
                            fmt::format("the training loss of micro-batch {} of {} is {}", i + 1,
                                        losses.size(), show(losses[i])));
}

std::optional<double> Trainer::evaluate() {
  if (data_.val.empty()) return std::nullopt;
  return strategy_->evaluate(data_.val, cfg_.batch_size, cfg_.model.block_size, cfg_.eval_steps);
}

double evaluate_loss(GPT& model, const std::vector<int32_t>& val, int B, int T, int eval_steps) {
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  double sum = 0.0;
  for (int i = 0; i < eval_steps; ++i) {
    eval_batch(val, B, T, i, inputs.data(), targets.data());
    sum += model.forward(inputs.data(), targets.data(), B, T, /*for_backward=*/false);
  }
  return sum / eval_steps;
}

LoadedModel load_model(const std::string& run_dir, int max_batch,
                       const std::vector<std::string>& sets) {
  if (!has_checkpoint(run_dir) && is_hf_gpt2_dir(run_dir))
    return load_hf_gpt2(run_dir, max_batch, sets);
  LoadedModel lm;
  CheckpointState st = load_checkpoint_state(run_dir);
  load_config_string(st.config_toml, checkpoint_dir(run_dir) + "/state.json", lm.cfg);
  const GPTConfig m = lm.cfg.model;
  apply_overrides(sets, lm.cfg);
  lm.cfg.model = m;
  lm.cfg.validate();
  lm.tokenizer = st.tokenizer;
  lm.step = st.step;
  lm.backend = make_backend(lm.cfg.device, backend_options(lm.cfg, BackendUse::inference));
  lm.backend->set_precision(lm.cfg.precision);
  lm.model = make_gpt(lm.cfg, max_batch > 0 ? max_batch : lm.cfg.batch_size, "train.batch_size",
                      *lm.backend, /*training=*/false);
  load_checkpoint_tensors(run_dir, *lm.model, nullptr, nullptr);
  lm.backend->weights_updated();
  return lm;
}

CheckpointState Trainer::state_record() const {
  CheckpointState st;
  st.step = step_;
  st.data_epoch = sampler_->epoch();
  st.data_cursor = sampler_->cursor();
  st.last_loss = last_loss_;
  st.loss_scale = scaler_.scale();
  st.scaler_clean_steps = scaler_.clean_steps();
  st.skipped_steps = scaler_.skipped_steps();
  st.config_toml = cfg_.to_toml();
  st.tokenizer = data_.tokenizer;
  st.data = data_id_;
  st.world_size = world_;
  // the run up to this step: a resume after a session that ended without its summary reads it
  const int64_t tokens_per_step =
      (int64_t)cfg_.batch_size * cfg_.model.block_size * cfg_.grad_accum_steps * world_;
  auto or_null = [](std::optional<int64_t> v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  st.run = {{run::key::session, or_null(run_session_)},
            {run::key::first_step, or_null(run_first_step_)},
            {run::key::tokens,
             or_null(tokens_before_
                         ? std::optional<int64_t>(*tokens_before_ +
                                                  (step_ - session_start_step_) * tokens_per_step)
                         : std::nullopt)}};
  return st;
}

void Trainer::set_run_record(std::optional<int64_t> session, std::optional<int64_t> first_step,
                             std::optional<int64_t> tokens_before) {
  run_session_ = session;
  run_first_step_ = first_step;
  tokens_before_ = tokens_before;
}

void Trainer::save() {
  strategy_->save_checkpoint(run_dir_, state_record());
  saved_step_ = step_;
}

void Trainer::evaluate_step(StepReport& rep, RunResult& r) {
  r.val_loss = evaluate();
  if (r.val_loss && !std::isfinite(*r.val_loss))
    throw nonfinite_error(step_, "the validation loss is " + show(*r.val_loss));
  if (r.val_loss) {
    r.val_bits_per_byte = bits_per_byte(*r.val_loss, val_bytes_per_token_);
    rep.val_loss = r.val_loss;
    rep.val_bits_per_byte = r.val_bits_per_byte;
    if (!r.best_val_loss || *r.val_loss < *r.best_val_loss) {
      r.best_val_loss = r.val_loss;
      r.best_val_step = step_;
    }
  }
  if (cfg_.target_loss > 0 && !r.target && rep.val_loss && *rep.val_loss <= cfg_.target_loss) {
    TargetHit hit;
    hit.step = step_;
    hit.tokens = r.tokens;
    hit.at = std::chrono::steady_clock::now();
    if (earlier_wall_s_)
      hit.seconds =
          *earlier_wall_s_ + std::chrono::duration<double>(hit.at - session_start_).count();
    hit.val_loss = *rep.val_loss;
    if (observer_) observer_->target_reached(step_, hit.energy);
    rep.target_loss = cfg_.target_loss;
    // (the line shows this session's seconds where the earlier ones are unknown: summary.json's
    // target.seconds is then null with its reason)
    rep.target_s =
        hit.seconds.value_or(std::chrono::duration<double>(hit.at - session_start_).count());
    if (auto ej = hit.energy.find(run::key::energy_j); ej != hit.energy.end() && ej->is_number())
      rep.target_energy_j = ej->get<double>();
    rep.target_energy_estimated = hit.energy.value(run::key::energy_estimated, false);
    r.target = std::move(hit);
    r.stopped_at_target = cfg_.stop_at_target;
  }
}

RunResult Trainer::run(int64_t stop_at) {
  RunResult r;
  const int64_t tokens_per_step =  // of all ranks together
      (int64_t)cfg_.batch_size * cfg_.model.block_size * cfg_.grad_accum_steps * world_;
  const double flops_per_step =
      gpt_flops_per_token(cfg_.model, cfg_.model.block_size) * tokens_per_step;
  int64_t last = cfg_.max_steps;
  if (stop_at > 0 && stop_at < last) last = stop_at;
  RunLog runlog(run_dir_, log_, rank_ == 0);  // rank 0 writes the run folder
  const StopSignalHandlers handlers;          // until run() returns, an error included
  strategy_->clear_stop_signal();             // a signal of an earlier run() is done with
  using clock = std::chrono::steady_clock;
  if (observer_) observer_->set_last_step(last);
  while (step_ < last && stop_signal() == 0 && !r.stopped_at_target) {
    if (!r.first_step_at) r.first_step_at = clock::now();
    if (observer_) observer_->begin_step(step_ + 1);
    auto t0 = clock::now();
    double lr = learning_rate_at(cfg_, step_);
    double loss = train_step();
    double dt = std::chrono::duration<double>(clock::now() - t0).count();
    const ThreadCount threads = backend_->thread_count();  // the team this step ran with
    backend_->end_step(dt);  // the CPU backend sizes its team for the next step
    r.train_time_s += dt;
    r.tokens += tokens_per_step;
    r.losses.push_back(loss);
    StepReport rep;
    rep.step = step_;
    rep.max_steps = cfg_.max_steps;
    rep.last = last;
    rep.loss = loss;
    rep.lr = lr;
    rep.grad_norm = last_grad_norm_;
    rep.step_time_s = dt;
    rep.tokens = static_cast<double>(tokens_per_step);
    if (scaler_.enabled()) {
      rep.loss_scale = scaler_.scale();
      rep.skipped = last_skipped_;
      rep.skipped_steps = scaler_.skipped_steps();
    }
    rep.threads = threads;
    if (observer_)
      rep.energy = observer_->end_step(step_, tokens_per_step, flops_per_step, rep.extra);
    rep.evaluated = (cfg_.eval_interval > 0 && step_ % cfg_.eval_interval == 0) || step_ == last;
    if (rep.evaluated) evaluate_step(rep, r);
    rep.final_line = rep.evaluated || last_skipped_ || step_ % cfg_.log_interval == 0 ||
                     step_ == last || r.stopped_at_target;
    runlog.step(rep);
    if (cfg_.checkpoint_interval > 0 && step_ % cfg_.checkpoint_interval == 0 && step_ < last)
      save();
  }
  r.interrupted_by = stop_signal();
  if (r.stopped_at_target && log_)
    std::fprintf(log_,
                 "greentrain: validation loss reached train.target_loss = %g at step %lld: "
                 "stopping (train.stop_at_target)\n",
                 cfg_.target_loss, (long long)step_);
  if (r.interrupted_by && log_)
    std::fprintf(log_, "\ngreentrain: signal %d received at step %lld: saving a checkpoint\n",
                 r.interrupted_by, (long long)step_);
  const auto save_t0 = clock::now();
  save();
  r.checkpoint_write_s = std::chrono::duration<double>(clock::now() - save_t0).count();
  if (auto* prof = profiling_stats(*backend_); prof && log_) print_profile(*prof, log_);
  r.step = step_;
  r.last_loss = last_loss_;
  r.skipped_steps = scaler_.skipped_steps();
  r.loss_scale = scaler_.scale();
  r.dist = strategy_->summary();
  r.threads = backend_->thread_policy();
  r.products = backend_->product_path();
  r.cuda_graph = graph_summary();
  return r;
}

int Trainer::stop_signal() const {
  // several ranks stop together, at the end of the step in which any rank got the signal
  return strategy_->stop_signal(g_stop_signal.load());
}

}  // namespace gt
