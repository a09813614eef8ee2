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
#include "dist/mpi_comm.h"
#include "energy/parse.h"
#include "run/schema.h"
#include "run/writer.h"
#include "train/checkpoint.h"
#include "train/hf_gpt2.h"

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

std::string format_duration(double s) {
  if (!(s >= 0) || std::isinf(s)) return "?";
  int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

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
    if (auto n = energy::try_parse_number<unsigned long long>(
            v, std::string("/proc/self/status: ") + key, "a size in kB", &err))
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
  if (!cfg_.init_from.empty() && !resume) apply_hf_gpt2_config(cfg_.init_from, cfg_, log_);
  if (comm_ && comm_->size() > 1) {
    rank_ = comm_->rank();
    world_ = comm_->size();
    // one device per rank of a node, where its traits say so (device_for_local_rank)
    cfg_.device = device_for_local_rank(cfg_.device, dist::local_rank_from_env());
  }
  backend_ = make_backend(cfg_.device, backend_options(cfg_));
  if (const char* prof = std::getenv("GT_PROFILE"); prof && *prof && std::string(prof) != "0")
    backend_ = make_profiling_backend(std::move(backend_));
  backend_->set_precision(cfg_.precision);
  scaler_ = GradScaler(cfg_.precision == Precision::fp16);
  std::optional<CheckpointState> st;
  if (resume) st = load_checkpoint_state(run_dir);
  TrainConfig saved;
  if (st) load_config_string(st->config_toml, checkpoint_dir(run_dir) + "/state.json", saved);
  // another number of ranks: the same global batch (micro-batches x accumulation x ranks)
  if (st && st->world_size != world_ && cfg_.grad_accum_steps == saved.grad_accum_steps) {
    const int64_t micro = (int64_t)saved.grad_accum_steps * st->world_size;
    if (micro % world_ != 0)
      throw Error(fmt::format(
          "resuming a run of {} ranks x {} accumulation steps on {} ranks: its {} micro-batches "
          "per step cannot be shared evenly; set train.grad_accum_steps (the global batch then "
          "changes) or use a rank count that divides {}",
          st->world_size, saved.grad_accum_steps, world_, micro, micro));
    cfg_.grad_accum_steps = static_cast<int>(micro / world_);
    if (log_)
      std::fprintf(log_,
                   "note: resuming a run of %d ranks on %d: train.grad_accum_steps = %d keeps its "
                   "global batch of %lld micro-batches per step\n",
                   st->world_size, world_, cfg_.grad_accum_steps, (long long)micro);
  }
  if (st && log_) {  // a policy changed on resume: allowed, but say the run is no longer exact
    auto note = [&](const char* key, const std::string& was, const std::string& now) {
      if (was != now)
        std::fprintf(log_,
                     "note: resuming with %s = %s (the checkpoint's run used %s): from here the "
                     "run differs from an uninterrupted one\n",
                     key, now.c_str(), was.c_str());
    };
    auto on_off = [](bool b) { return std::string(b ? "on" : "off"); };
    note("train.device", saved.device, cfg_.device);
    note("train.precision", to_string(saved.precision), to_string(cfg_.precision));
    note("train.fusion", on_off(saved.fusion), on_off(cfg_.fusion));
    note("train.recompute", to_string(saved.recompute), to_string(cfg_.recompute));
    note("train.stochastic_rounding", on_off(saved.stochastic_rounding),
         on_off(cfg_.stochastic_rounding));
    note("train.batch_size", std::to_string(saved.batch_size), std::to_string(cfg_.batch_size));
    note("micro-batches per step (train.grad_accum_steps x ranks)",
         std::to_string((int64_t)saved.grad_accum_steps * st->world_size),
         std::to_string((int64_t)cfg_.grad_accum_steps * world_));
  }
  // another tokenizer: the embedding rows are the old tokenizer's tokens
  bool new_tokenizer = false;
  // the vocabulary a bpe or gpt2 tokenizer is made from (data.vocab_size, data.tokenizer_model,
  // data.tokenizer_path), as words
  auto vocab_of = [](const TrainConfig& c) -> std::string {
    if (c.tokenizer == "gpt2") return fmt::format(" from '{}'", c.tokenizer_path);
    if (c.tokenizer != "bpe") return "";
    return c.tokenizer_model.empty() ? fmt::format(" of {} trained on the text", c.bpe_vocab_size)
                                     : fmt::format(" from '{}'", c.tokenizer_model);
  };
  if (st && (saved.tokenizer != cfg_.tokenizer || saved.data_format != cfg_.data_format ||
             vocab_of(saved) != vocab_of(cfg_))) {
    if (!allow_data_change)
      throw Error(fmt::format(
          "--resume with another tokenizer: the checkpoint of step {} was trained with "
          "data.format = '{}', data.tokenizer = '{}'{}; this run has data.format = '{}', "
          "data.tokenizer = '{}'{}. Resume with the checkpoint's, or pass --allow-data-change to "
          "go on with this one (the data position then restarts at the beginning)",
          st->step, saved.data_format, saved.tokenizer, vocab_of(saved), cfg_.data_format,
          cfg_.tokenizer, vocab_of(cfg_)));
    new_tokenizer = true;
  }
  try {
    data_ = load_data(cfg_, st && !new_tokenizer ? &st->tokenizer : nullptr);
  } catch (const Error& e) {  // e.g. a character the checkpoint's tokenizer does not know
    if (!st || st->data.is_null()) throw;
    throw Error(fmt::format("{} (resuming the checkpoint of step {}, trained on {})", e.what(),
                            st->step, describe_data(st->data)));
  }
  data_id_ = data_identity(cfg_, data_);
  val_bytes_per_token_ = eval_bytes_per_token(data_.tokenizer, data_.val, cfg_.batch_size,
                                              cfg_.model.block_size, cfg_.eval_steps);
  // other data: the saved position belongs to the old data's permutation
  std::string data_note;
  if (st && (new_tokenizer || (!st->data.is_null() && !same_data(st->data, data_id_)))) {
    const std::string was = st->data.is_null()
                                ? fmt::format("data.tokenizer = '{}'", saved.tokenizer)
                                : describe_data(st->data);
    if (!allow_data_change)
      throw Error(fmt::format(
          "--resume on other data: the checkpoint of step {} was trained on {}; this run reads "
          "{}. Resume on the same data, or pass --allow-data-change to go on with this data "
          "(the data position then restarts at the beginning)",
          st->step, was, describe_data(data_id_)));
    data_note = fmt::format(
        "resuming at step {} on other data (--allow-data-change): the checkpoint was trained on "
        "{}; this run reads {}; the data position restarts at the beginning",
        st->step, was, describe_data(data_id_));
  }
  int v = data_.tokenizer.vocab_size();
  if (cfg_.model.vocab_size == 0) cfg_.model.vocab_size = v;
  if (cfg_.model.vocab_size < v)
    throw Error(fmt::format("model.vocab_size = {} is smaller than the tokenizer's {} tokens",
                            cfg_.model.vocab_size, v));
  // what the process holds before the model: code, libraries, the loaded data. Loading
  // (tokenizing) peaks above that and frees it again; that peak is kept apart, and the high-
  // water mark is reset (Linux clear_refs 5) so the reported peak is the training phase's.
  load_peak_bytes_ = peak_rss_bytes();
  {
    std::ofstream clear("/proc/self/clear_refs");
    if (clear) clear << "5";
  }
  runtime_bytes_ = current_rss_bytes();
  if (cfg_.memory_budget > 0 && !resume) {
    const auto rc = cfg_.recompute;
    const auto prec = cfg_.precision;
    int b = largest_batch_that_fits(cfg_.model, rc, cfg_.fusion, prec,
                                    static_cast<size_t>(cfg_.memory_budget), *backend_);
    if (b == 0)
      throw Error(fmt::format(
          "train.memory_budget = {} bytes: not even a micro-batch of 1 fits ({} bytes planned)",
          cfg_.memory_budget,
          plan_memory(cfg_.model, 1, rc, cfg_.fusion, prec, *backend_).total()));
    // no larger than the number of distinct windows in the training data
    const int64_t windows = (int64_t)data_.train.size() - cfg_.model.block_size;
    if (windows >= 1 && b > windows) b = static_cast<int>(windows);
    cfg_.batch_size = b;
  }
  try {
    model_ =
        std::make_unique<GPT>(cfg_.model, cfg_.batch_size, cfg_.recompute, *backend_, cfg_.fusion);
  } catch (const Error& e) {
    if (cfg_.memory_budget <= 0 || resume) throw;
    throw Error(fmt::format("train.memory_budget = {} bytes chose micro-batch {}: {}",
                            cfg_.memory_budget, cfg_.batch_size, e.what()));
  }
  setup_dist();
  m_ = std::make_unique<Arena>("adamw.exp_avg");
  v_ = std::make_unique<Arena>("adamw.exp_avg_sq");
  if (!pieces_.empty() || (world_ > 1 && cfg_.zero == 1)) {  // this rank's shard only
    m_->plan("shard", {(int64_t)std::max<size_t>(shard_elems_, 1)});
    v_->plan("shard", {(int64_t)std::max<size_t>(shard_elems_, 1)});
  } else {
    for (auto& s : model_->specs()) {
      m_->plan(s.name, s.shape);
      v_->plan(s.name, s.shape);
    }
  }
  m_->allocate(*backend_);
  v_->allocate(*backend_);
  sampler_ = std::make_unique<BatchSampler>(data_.train, cfg_.batch_size, cfg_.model.block_size,
                                            static_cast<uint64_t>(cfg_.seed));
  inputs_.resize((size_t)cfg_.batch_size * cfg_.model.block_size);
  targets_.resize(inputs_.size());
  if (rank_ == 0) fs::create_directories(run_dir_);
  if (st) {
    if (world_ > 1 && cfg_.zero == 1)
      load_sharded_state();
    else
      load_checkpoint_tensors(run_dir_, *model_, m_.get(), v_.get());
    backend_->weights_updated();
    if (scaler_.enabled())
      scaler_.restore(st->loss_scale, st->scaler_clean_steps, st->skipped_steps);
    step_ = saved_step_ = st->step;
    last_loss_ = st->last_loss;
    if (data_note.empty()) sampler_->restore(st->data_epoch, st->data_cursor);
    // only the metrics lines of steps up to here are kept: the resumed run re-does the rest
    if (rank_ == 0) run::keep_metrics_up_to(run_dir_, step_);
    if (!data_note.empty() && rank_ == 0) {  // said, and kept with the run's record
      if (log_) std::fprintf(log_, "note: %s\n", data_note.c_str());
      nlohmann::ordered_json rec;
      rec[run::key::step] = step_;
      rec[run::key::note] = data_note;
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

double Trainer::train_step() {
  const int B = cfg_.batch_size, T = cfg_.model.block_size;
  model_->zero_grad();
  if (cfg_.stochastic_rounding)  // a seed per step: resume rounds as the run would
    backend_->set_stochastic_rounding(
        true, static_cast<uint64_t>(cfg_.seed) * 0x100000001B3ull + static_cast<uint64_t>(step_));
  // One process with fusion on: the step talks to the device's host once, at its end (the
  // tokens go up through pinned memory, the losses and the update's result come back
  // asynchronously, the norm, the clip and the skip are decided on the device).
  const bool one_sync = world_ == 1 && cfg_.fusion;
  double loss = 0.0;
  // the mean over the global batch: every rank's micro-batches, summed by the reduction
  const float dloss =
      static_cast<float>(scaler_.scale() / (double(B) * T * cfg_.grad_accum_steps * world_));
  for (int micro = 0; micro < cfg_.grad_accum_steps; ++micro) {
    // micro-batch j = micro * N + rank of the step's N x grad_accum_steps: the global batches
    // do not depend on the number of ranks
    if (world_ > 1) sampler_->skip((int64_t)rank_ * B);
    sampler_->next(inputs_.data(), targets_.data());
    if (world_ > 1) sampler_->skip((int64_t)(world_ - 1 - rank_) * B);
    if (one_sync) {
      model_->forward_step(inputs_.data(), targets_.data(), B, T, dloss, micro);
    } else {
      const double l = model_->forward(inputs_.data(), targets_.data(), B, T);
      // under fp16 the gradients are inf/NaN too and the loss scaler skips the step; with
      // several ranks the summed loss is checked below, so that every rank stops together
      if (!std::isfinite(l) && !scaler_.enabled() && world_ == 1)
        throw nonfinite_error(
            step_ + 1, fmt::format("the training loss of micro-batch {} of {} is {}", micro + 1,
                                   cfg_.grad_accum_steps, show(l)));
      loss += l;
    }
    const bool last_micro = micro + 1 == cfg_.grad_accum_steps;
    if (sync_ && last_micro)  // reduce each layer's gradients as soon as they are final
      model_->set_grad_ready_hook([this](size_t first, size_t) {
        // a mark, not a synchronization: the communication thread waits for it (an event on
        // a GPU) while this thread queues the rest of the backward
        Arena& g = model_->grads();
        sync_->start(sync_->bucket_at(
                         static_cast<size_t>(g.at(first).f32() - static_cast<float*>(g.base()))),
                     backend_->mark_queued());
      });
    model_->backward(dloss);
    if (sync_ && last_micro) model_->set_grad_ready_hook({});
  }
  if (world_ > 1) {
    sync_->wait();
    double sum = loss;  // the mean over ranks; and whether any rank was asked to stop
    comm_->all_reduce(&sum, 1, dist::CommType::f64, dist::ReduceOp::sum);
    loss = sum / world_;
    double sig = g_stop_signal.load();
    comm_->all_reduce(&sig, 1, dist::CommType::f64, dist::ReduceOp::max);
    agreed_stop_ = static_cast<int>(sig);
    if (!std::isfinite(loss) && !scaler_.enabled())
      throw nonfinite_error(step_ + 1, fmt::format("the training loss (mean over {} ranks) is {}",
                                                   world_, show(loss)));
  }
  // AdamW's t counts the steps taken, not the ones skipped for inf/NaN gradients
  const float lr = static_cast<float>(learning_rate_at(cfg_, step_));
  OptimizerResult opt;
  int nonfinite_state = -1;  // unknown: checked below
  if (one_sync) {
    const AdamStepResult* r = optimizer_step_async(*backend_, *model_, *m_, *v_, cfg_, lr,
                                                   optimizer_steps() + 1, scaler_.scale());
    backend_->synchronize();  // the step's one host synchronization
    for (int micro = 0; micro < cfg_.grad_accum_steps; ++micro) {
      const double l = model_->step_loss(micro);
      if (!std::isfinite(l) && !scaler_.enabled())
        throw nonfinite_error(
            step_ + 1, fmt::format("the training loss of micro-batch {} of {} is {}", micro + 1,
                                   cfg_.grad_accum_steps, show(l)));
      loss += l;
    }
    opt.skipped = !std::isfinite(r->norm_sq);
    opt.grad_norm = opt.skipped ? r->norm_sq : std::sqrt(r->norm_sq) / scaler_.scale();
    if (opt.skipped) opt.nonfinite_tensor = first_nonfinite_gradient(*backend_, *model_);
    nonfinite_state = r->nonfinite_state;
  } else {
    opt = world_ > 1 && cfg_.zero == 1
              ? sharded_optimizer_step(lr, optimizer_steps() + 1, scaler_.scale())
              : optimizer_step(*backend_, *model_, *m_, *v_, cfg_, lr, optimizer_steps() + 1,
                               scaler_.scale());
  }
  loss /= cfg_.grad_accum_steps;
  if (opt.skipped && !scaler_.enabled())
    throw nonfinite_error(step_ + 1,
                          fmt::format("the gradient of '{}' holds inf or NaN (global norm {})",
                                      opt.nonfinite_tensor, show(opt.grad_norm)));
  if (!opt.skipped && nonfinite_state != 0)  // the device raised it, or did not check
    if (std::string bad = world_ > 1 && cfg_.zero == 1
                              ? sharded_nonfinite_state()
                              : first_nonfinite_state(*backend_, *model_, *m_, *v_);
        !bad.empty())
      throw nonfinite_error(step_ + 1, bad + " became inf or NaN in the AdamW update");
  last_grad_norm_ = opt.grad_norm;
  last_skipped_ = opt.skipped;
  scaler_.update(opt.skipped);
  ++step_;
  last_loss_ = loss;
  return loss;
}

std::optional<double> Trainer::evaluate() {
  if (data_.val.empty()) return std::nullopt;
  if (world_ == 1)
    return evaluate_loss(*model_, data_.val, cfg_.batch_size, cfg_.model.block_size,
                         cfg_.eval_steps);
  // several ranks: rank r evaluates batches r, r + N, ...; the sum over ranks
  const int B = cfg_.batch_size, T = cfg_.model.block_size;
  std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
  double sum = 0.0;
  for (int i = rank_; i < cfg_.eval_steps; i += world_) {
    eval_batch(data_.val, B, T, i, inputs.data(), targets.data());
    sum += model_->forward(inputs.data(), targets.data(), B, T, /*for_backward=*/false);
  }
  comm_->all_reduce(&sum, 1, dist::CommType::f64, dist::ReduceOp::sum);
  return sum / cfg_.eval_steps;
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
  lm.model = std::make_unique<GPT>(lm.cfg.model, max_batch > 0 ? max_batch : lm.cfg.batch_size,
                                   lm.cfg.recompute, *lm.backend, lm.cfg.fusion);
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
  return st;
}

void Trainer::save() {
  const CheckpointState st = state_record();
  if (world_ > 1 && cfg_.zero == 1) {  // the whole AdamW state, gathered from the shards
    Arena mf("adamw.exp_avg"), vf("adamw.exp_avg_sq");
    for (auto& s : model_->specs()) {
      mf.plan(s.name, s.shape);
      vf.plan(s.name, s.shape);
    }
    mf.allocate(*backend_);
    vf.allocate(*backend_);
    gather_sharded_state(mf, vf);
    if (rank_ == 0) save_checkpoint(run_dir_, *model_, mf, vf, st);
  } else if (rank_ == 0) {
    save_checkpoint(run_dir_, *model_, *m_, *v_, st);
  }
  if (world_ > 1) comm_->barrier();  // the checkpoint is on disk when any rank goes on
  saved_step_ = step_;
}

void Trainer::log_line(const std::string& s, bool final_line) {
  if (!log_) return;
  static const bool tty = isatty(fileno(log_));
  if (tty) {
    std::fprintf(log_, "\r\033[K%s%s", s.c_str(), final_line ? "\n" : "");
  } else if (final_line) {
    std::fprintf(log_, "%s\n", s.c_str());
  }
  std::fflush(log_);
}

RunResult Trainer::run(int64_t stop_at) {
  RunResult r;
  const int64_t tokens_per_step =  // of all ranks together
      (int64_t)cfg_.batch_size * cfg_.model.block_size * cfg_.grad_accum_steps * world_;
  const double flops_per_step =
      gpt_flops_per_token(cfg_.model, cfg_.model.block_size) * tokens_per_step;
  int64_t last = cfg_.max_steps;
  if (stop_at > 0 && stop_at < last) last = stop_at;
  std::optional<run::MetricsLog> metrics;  // rank 0 writes the run folder
  if (rank_ == 0) metrics.emplace(run_dir_);
  g_stop_signal.store(0);
  g_trainer_pid.store(::getpid());
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  struct RestoreSignals {  // on every way out, an error included
    struct sigaction old[kNumStopSignals] {};
    ~RestoreSignals() {
      for (int i = 0; i < kNumStopSignals; ++i) sigaction(kStopSignals[i], &old[i], nullptr);
    }
  } restore;
  for (int i = 0; i < kNumStopSignals; ++i) sigaction(kStopSignals[i], &sa, &restore.old[i]);
  using clock = std::chrono::steady_clock;
  const auto run_t0 = clock::now();
  std::vector<double> recent;  // step times for the ETA
  agreed_stop_ = 0;
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
    recent.push_back(dt);
    if (recent.size() > 20) recent.erase(recent.begin());
    double mean_dt = 0;
    for (double x : recent) mean_dt += x;
    mean_dt /= recent.size();
    nlohmann::ordered_json rec;
    rec[run::key::step] = step_;
    rec[run::key::loss] = loss;
    rec[run::key::lr] = lr;
    rec[run::key::grad_norm] = last_grad_norm_;
    if (scaler_.enabled()) {
      rec[run::key::loss_scale] = scaler_.scale();
      rec[run::key::skipped] = last_skipped_;
      rec[run::key::skipped_steps] = scaler_.skipped_steps();
    }
    rec[run::key::step_time_s] = dt;
    if (threads.team > 0) rec[run::key::threads] = threads.threads;
    rec[run::key::tokens_per_s] = tokens_per_step / dt;
    nlohmann::json extra;
    std::string energy_text;
    if (observer_) energy_text = observer_->end_step(step_, tokens_per_step, flops_per_step, extra);
    for (auto& [k, v] : extra.items()) rec[k] = v;
    bool do_eval = (cfg_.eval_interval > 0 && step_ % cfg_.eval_interval == 0) || step_ == last;
    std::string val_text;
    if (do_eval) {
      r.val_loss = evaluate();
      if (r.val_loss && !std::isfinite(*r.val_loss)) {
        throw nonfinite_error(step_, "the validation loss is " + show(*r.val_loss));
      }
      if (r.val_loss) {
        rec[run::key::val_loss] = *r.val_loss;
        r.val_bits_per_byte = bits_per_byte(*r.val_loss, val_bytes_per_token_);
        rec[run::key::val_bits_per_byte] =
            r.val_bits_per_byte ? nlohmann::json(*r.val_bits_per_byte) : nlohmann::json();
        val_text = fmt::format(" | val {:.4f}", *r.val_loss);
        if (r.val_bits_per_byte)
          val_text += fmt::format(" ({:.3f} bits/byte)", *r.val_bits_per_byte);
        if (!r.best_val_loss || *r.val_loss < *r.best_val_loss) {
          r.best_val_loss = r.val_loss;
          r.best_val_step = step_;
        }
      }
    }
    if (cfg_.target_loss > 0 && !r.target && r.val_loss && do_eval &&
        *r.val_loss <= cfg_.target_loss) {
      TargetHit hit;
      hit.step = step_;
      hit.tokens = r.tokens;
      hit.seconds = std::chrono::duration<double>(clock::now() - run_t0).count();
      hit.val_loss = *r.val_loss;
      if (observer_) observer_->target_reached(step_, hit.energy);
      rec[run::key::target_reached] = cfg_.target_loss;
      const auto& ej = hit.energy.contains(run::key::energy_j) ? hit.energy[run::key::energy_j]
                                                               : nlohmann::json();
      val_text += fmt::format(
          " | TARGET {:g} reached ({:.1f} s, {})", cfg_.target_loss, hit.seconds,
          ej.is_number()
              ? fmt::format("{:.4g} J{}", ej.get<double>(),
                            hit.energy.value(run::key::energy_estimated, false) ? " estimated" : "")
              : std::string("energy unknown"));
      r.target = std::move(hit);
      r.stopped_at_target = cfg_.stop_at_target;
    }
    if (metrics) metrics->append(rec);
    std::string line = fmt::format(
        "step {:>5}/{} | loss {:.4f}{}{} | lr {:.2e} | {:.0f} tok/s | {:.0f} ms/step{}{} | ETA {}",
        step_, cfg_.max_steps, loss, val_text,
        last_skipped_
            ? fmt::format(" | SKIPPED (inf/NaN gradients), loss scale now {:g}", scaler_.scale())
            : "",
        lr, tokens_per_step / mean_dt, dt * 1000,
        threads.threads < threads.team
            ? fmt::format(" | {} of {} threads (cores busy)", threads.threads, threads.team)
            : "",
        energy_text.empty() ? "" : " | " + energy_text, format_duration(mean_dt * (last - step_)));
    log_line(line, do_eval || last_skipped_ || step_ % cfg_.log_interval == 0 || step_ == last ||
                       r.stopped_at_target);
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
  if (world_ > 1) r.dist = dist_summary();
  r.threads = backend_->thread_policy();
  return r;
}

int Trainer::stop_signal() const {
  // several ranks stop together, at the end of the step in which any rank got the signal
  return world_ > 1 ? agreed_stop_ : g_stop_signal.load();
}

}  // namespace gt
