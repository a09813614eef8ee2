// train/trainer.h: the training loop of DESIGN.md:
//   data -> forward -> backward -> gradient clipping -> optimizer -> energy window -> log,
// with learning-rate warm-up and cosine decay (as nanoGPT), gradient accumulation,
// periodic validation, atomic checkpoints, bit-exact resume, and a checkpoint on
// SIGINT/SIGTERM/SIGHUP/SIGUSR1/SIGUSR2/SIGPIPE before exiting (in the process that trains; a
// forked child gets the default action).
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "model/gpt.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/data.h"
#include "train/precision.h"
#include "train/resume_plan.h"
#include "train/run_log.h"
#include "train/strategy.h"

namespace gt {

/// Hooks around each optimizer step; the energy meter implements them (train/energy_hook.h).
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  /// Called at the start of run() with the step it ends at: train.max_steps, or an earlier
  /// stop_at (ablate's segments, `--stop-at`).
  virtual void set_last_step(int64_t last) {}
  /// Called before the first micro-batch of a step.
  virtual void begin_step(int64_t step) {}
  /// Called after the optimizer update with the step's tokens and model FLOPs; may add
  /// fields to the step's metrics record (e.g. "energy_j") and returns text for the
  /// progress line (e.g. "41 W, 0.012 J/tok") with the window that text covers (StepNote).
  virtual StepNote end_step(int64_t step, int64_t tokens, double flops, nlohmann::json& record) {
    return {};
  }
  /// Called once at the end of run(); may add fields to summary.json.
  virtual void finish(nlohmann::json& summary) {}
  /// Called once, after the evaluation of the step at which the validation loss first reached
  /// train.target_loss; may add the energy spent to get there to `fields` ("energy_j" in J,
  /// "g_co2e" in gCO2e, "energy_estimated", and "energy_unknown_reason" when unknown).
  virtual void target_reached(int64_t step, nlohmann::json& fields) {}
};

/// Learning rate at 0-based step `it`: linear warm-up over warmup_steps, then cosine decay
/// to min_lr at lr_decay_steps (default max_steps), then min_lr (nanoGPT's get_lr).
double learning_rate_at(const TrainConfig& cfg, int64_t it);

/// When this process first saw the validation loss reach train.target_loss (evaluations happen
/// every train.eval_interval steps, so that is the resolution).
struct TargetHit {
  int64_t step = 0;    ///< the step whose evaluation reached the target
  int64_t tokens = 0;  ///< tokens trained in this process up to that step
  /// The run's wall seconds up to the end of that evaluation (s): the earlier sessions' wall_s
  /// plus this session's from its start (Trainer::set_wall_clock; loading included); empty
  /// when an earlier session's wall time is unknown. The progress line and summary.json's
  /// target.seconds both show it.
  std::optional<double> seconds;
  std::chrono::steady_clock::time_point at;  ///< when that evaluation ended
  double val_loss = 0;                       ///< the validation loss that reached the target
  nlohmann::json energy;  ///< what StepObserver::target_reached added (energy_j, g_co2e, ...)
};

/// What run() did.
struct RunResult {
  int64_t step = 0;                ///< optimizer steps completed in total
  double last_loss = 0;            ///< training loss of the last step
  std::optional<double> val_loss;  ///< last validation loss
  /// val_loss in bits per byte (bits_per_byte() in train/data.h); nullopt when the bytes of the
  /// tokens are unknown (pre-tokenized data without a tokenizer)
  std::optional<double> val_bits_per_byte;
  int interrupted_by = 0;      ///< signal number when stopped by a signal, else 0
  double train_time_s = 0;     ///< wall time of the steps run in this process
  int64_t tokens = 0;          ///< tokens trained in this process
  int64_t skipped_steps = 0;   ///< steps skipped for inf/NaN gradients (fp16), in total
  double loss_scale = 1;       ///< fp16 loss scale at the end (1 otherwise)
  std::vector<double> losses;  ///< training loss of each step run in this process
  /// What an interruption costs (summary.json's "interruption"): the wall time of the
  /// checkpoint written at the end of run(), s, and when this process began its first step
  /// (empty when none ran).
  std::optional<double> checkpoint_write_s;
  std::optional<std::chrono::steady_clock::time_point> first_step_at;

  // train.target_loss
  std::optional<TargetHit> target;      ///< set when it was reached in this process
  bool stopped_at_target = false;       ///< train.stop_at_target ended the run there
  std::optional<double> best_val_loss;  ///< lowest validation loss seen in this process
  int64_t best_val_step = 0;            ///< the step of best_val_loss

  /// Data parallelism (several ranks): {"ranks", "zero", "grad_comm", "buckets",
  /// "bytes_per_step" (gradient bytes this rank sent per step), "ring_allreduce_bytes_per_step"
  /// (2(N-1)/N x gradient bytes), "per_rank": [{"rank", "node", "collective_wait_s" (s in
  /// collectives on the trainer's thread, the exposed part of the gradient reduction included),
  /// "grad_comm_s" (s the communication thread spent reducing gradients), "hidden_fraction"
  /// (share of grad_comm_s overlapped with the backward, null when 0), "bytes_sent"}]};
  /// null with one rank. The same on every rank.
  nlohmann::json dist;
  /// The CPU backend's thread policy at the end (backend.h ThreadPolicy); null for a backend
  /// without threads of its own.
  std::optional<ThreadPolicy> threads;
  /// What ran the matrix products (backend.h ProductPath: kernel, instruction set, whether
  /// emulated); null where the backend does not say.
  std::optional<ProductPath> products;
  /// train.cuda_graph where the device captures graphs (Backend::supports_graphs), else null:
  /// {"requested", "used", "why_not" (null when used), "launches", "instantiations",
  /// "updates"} (Backend::GraphStats, counted since the backend was made).
  nlohmann::json cuda_graph;
};

class Trainer {
 public:
  /// Makes the backend train.device names (with train.threads), loads the data and builds the
  /// model. With resume, the configuration,
  /// tokenizer, weights, AdamW state and data position come from run_dir's checkpoint
  /// (cfg must then be the checkpoint's configuration, possibly with overrides).
  /// log: where progress lines go (nullptr: silent). Throws gt::Error on bad input, and on a
  /// resume whose data or tokenizer differ from the checkpoint's (data_identity(), naming
  /// both) unless allow_data_change: then the data position restarts at the beginning and a
  /// note goes to log and into metrics.jsonl ({"step", "note", "data_was", "data_now"}).
  ///
  /// comm: the job's communicator when launched as several ranks (dist/mpi_comm.h; nullptr or
  /// one rank: a single process). Each rank then draws its part of every global batch
  /// (micro-batch j of a step's N x grad_accum_steps goes to rank j mod N), gradients are
  /// reduced in buckets during the backward (dist/grad_sync.h; NCCL on a CUDA device),
  /// train.zero = 1 shards the AdamW state, and only rank 0 writes the run folder (pass log =
  /// nullptr elsewhere). Every rank must construct, train, evaluate and save in step.
  /// Resuming on another number of ranks keeps the global batch: grad_accum_steps is rescaled
  /// (with a note) when it was left as the checkpoint's, else gt::Error if it cannot be.
  Trainer(const TrainConfig& cfg, const std::string& run_dir, bool resume, FILE* log = stdout,
          bool allow_data_change = false, dist::Communicator* comm = nullptr);
  ~Trainer();

  /// Trains up to train.max_steps, or until step stop_at (> 0) is done, or until a
  /// SIGINT/SIGTERM/SIGHUP/SIGUSR1/SIGUSR2/SIGPIPE arrives, or (train.stop_at_target) until the
  /// validation loss reaches train.target_loss; saves a checkpoint at the end in every case.
  RunResult run(int64_t stop_at = 0);
  /// Mean validation loss over train.eval_steps batches (nullopt without a validation split).
  std::optional<double> evaluate();
  CheckpointState state_record() const;  ///< what save() writes besides the tensors
  void save();

  void set_observer(StepObserver* obs) { observer_ = obs; }
  /// The run before this session (run/resume.h prior_sessions()): this session's number in its
  /// run, the run's first step and the tokens trained before this session, each empty when
  /// unknown; every checkpoint's "run" record adds this session's tokens to them. Without this
  /// call a fresh run is session 1 from step 0 and a resumed one has them unknown.
  void set_run_record(std::optional<int64_t> session, std::optional<int64_t> first_step,
                      std::optional<int64_t> tokens_before);
  /// The "run" record of the checkpoint this run resumed from (null: none, or an older one).
  const nlohmann::json& resumed_run_record() const { return resumed_run_; }
  /// When this session began (loading included) and the wall seconds of the run's earlier
  /// sessions (0 for a fresh run; empty: unknown): TargetHit::seconds counts from them. Without
  /// this call: from the Trainer's construction, with no earlier sessions for a fresh run and
  /// unknown ones for a resumed run.
  void set_wall_clock(std::chrono::steady_clock::time_point session_start,
                      std::optional<double> earlier_wall_s) {
    session_start_ = session_start;
    earlier_wall_s_ = earlier_wall_s;
  }
  GPT& model() { return *model_; }
  const TokenData& data() const { return data_; }
  const TrainConfig& config() const { return cfg_; }
  int64_t step() const { return step_; }
  /// Global L2 norm of the gradients before clipping, of the last step.
  double last_grad_norm() const { return last_grad_norm_; }
  /// The fp16 loss scaler (disabled in other precisions).
  GradScaler& scaler() { return scaler_; }
  /// AdamW steps taken (step() minus the steps skipped for inf/NaN gradients).
  int64_t optimizer_steps() const { return step_ - scaler_.skipped_steps(); }
  /// Whether the last train_step() was skipped (inf/NaN gradients under fp16).
  bool last_step_skipped() const { return last_skipped_; }
  /// AdamW first and second moments, tensor for tensor like model().params(); under ZeRO-1
  /// (train.zero = 1, several ranks) one flat tensor, "shard": this rank's part only.
  Arena& adam_m() { return *m_; }
  Arena& adam_v() { return *v_; }
  /// The backend the model runs on (its precision is train.precision).
  Backend& backend() { return *backend_; }
  /// One optimizer step (all micro-batches); returns the mean training loss. A non-finite
  /// training loss, gradient, AdamW moment or parameter is caught in the step where it first
  /// appears (a loss after the step's backward, before the update), and named: under
  /// fp16 a step with an inf/NaN loss or gradient is skipped (the loss scaler's job); otherwise
  /// it throws gt::Error naming the step and the tensor, before anything is saved (the last
  /// checkpoint stays as it was).
  double train_step();
  /// Resident bytes of the process before the model was allocated (code, libraries, loaded
  /// data); the memory plan's runtime term.
  size_t runtime_bytes() const { return runtime_bytes_; }
  /// Peak resident bytes while loading the data (before the high-water mark was reset for the
  /// training phase; see peak_rss_bytes()).
  size_t load_peak_bytes() const { return load_peak_bytes_; }
  /// This process's rank and the number of ranks (0 and 1 without a communicator).
  int rank() const { return rank_; }
  int world_size() const { return world_; }
  /// The job's communicator (nullptr for a single process).
  dist::Communicator* communicator() const { return world_ > 1 ? comm_ : nullptr; }

 private:
  /// The runtime_bytes() and load_peak_bytes() of the memory plan; resets the high-water mark.
  void account_runtime_memory();
  /// train.memory_budget: the largest micro-batch whose memory plan fits (gt::Error if none).
  void fit_batch_to_memory_budget();
  /// The weights, AdamW's state, the loss scaler and the data position from the resume plan's
  /// checkpoint, or from train.init_from, or initialized; writes the run folder's config.
  void start_from(const ResumePlan& plan);
  int stop_signal() const;
  /// After a step whose evaluation is due: the validation loss into rep and r (best, bits per
  /// byte), and train.target_loss's first hit (TargetHit, seconds: set_wall_clock's). Throws the
  /// nonfinite error for an inf or NaN validation loss.
  void evaluate_step(StepReport& rep, RunResult& r);
  /// train_step() of a strategy whose losses stay on the device (one process, fusion on): the
  /// step's micro-batches drawn first, then its ops queued, as one graph when graph_.use
  /// (from the process's second step: the first sizes the buffers), then one synchronization.
  double train_step_on_device();
  /// Queues the step's ops (`queue`) captured as one graph and launches it; when the capture
  /// fails, says why once (log), stops using graphs and calls queue() again without one.
  void queue_as_graph(const std::function<void()>& queue);
  /// The end of every step: the update's inf/NaN errors, the loss scaler, step_; returns the
  /// step's loss (`loss`: the sum over this process's micro-batches).
  double end_step(const OptimizerResult& opt, double loss);
  /// The next micro-batch of this rank into inputs and targets (B x T ids each).
  void sample_micro_batch(int32_t* inputs, int32_t* targets);
  /// The loss gradient each position's loss gets: loss scale / (tokens of the global batch).
  float step_dloss() const;
  /// train.stochastic_rounding's seed for this step.
  void set_step_rounding();
  /// Whether the steps are captured as graphs (graph_), and why not.
  void plan_step_graph();
  /// RunResult::cuda_graph.
  nlohmann::json graph_summary() const;
  /// Throws the error of a micro-batch whose training loss is inf or NaN (`losses`: this step's,
  /// in order); nothing under fp16, whose loss scaler skips such a step.
  void check_training_losses(const std::vector<double>& losses) const;
  /// The error that stops a run at `step` on an inf or NaN (`what` names the value).
  Error nonfinite_error(int64_t step, const std::string& what) const;
  TrainConfig cfg_;
  std::string run_dir_;
  FILE* log_;
  std::unique_ptr<Backend> backend_;
  TokenData data_;
  nlohmann::json data_id_;          ///< data_identity() of data_, saved in every checkpoint
  double val_bytes_per_token_ = 0;  ///< eval_bytes_per_token() of the validation windows
  std::unique_ptr<GPT> model_;
  std::unique_ptr<Arena> m_, v_;
  std::unique_ptr<BatchSampler> sampler_;
  std::vector<int32_t> inputs_, targets_;
  std::vector<int32_t> step_tokens_;  ///< train_step_on_device's micro-batches
  /// train.cuda_graph in this process.
  struct StepGraph {
    bool use = false;     ///< the steps after the first are captured and launched as graphs
    std::string why_not;  ///< why not, where the device captures graphs
    int64_t steps = 0;    ///< on-device steps run so far
  } graph_;
  int64_t step_ = 0;
  int64_t saved_step_ = -1;         ///< step of the checkpoint on disk (-1: none yet)
  int64_t session_start_step_ = 0;  ///< step_ when this session began
  /// set_run_record's figures (the checkpoint's "run" record) and the resumed checkpoint's
  std::optional<int64_t> run_session_ = 1, run_first_step_ = 0, tokens_before_ = 0;
  nlohmann::json resumed_run_;
  std::chrono::steady_clock::time_point session_start_ = std::chrono::steady_clock::now();
  std::optional<double> earlier_wall_s_ = 0.0;  ///< set_wall_clock
  size_t runtime_bytes_ = 0, load_peak_bytes_ = 0;
  double last_loss_ = 0;
  double last_grad_norm_ = 0;
  bool last_skipped_ = false;
  GradScaler scaler_;
  StepObserver* observer_ = nullptr;

  dist::Communicator* comm_ = nullptr;  // the job's, when launched as several ranks
  /// One process, data parallel or ZeRO-1 (train/strategy.h): AdamW's state, the gradient
  /// reduction, checkpoints and the sharded evaluation.
  std::unique_ptr<TrainStrategy> strategy_;
  int rank_ = 0, world_ = 1;
};

/// Mean loss over eval_steps validation batches of (B,T) (eval_batch order); the one
/// evaluation that training, `greentrain eval` and tests share.
double evaluate_loss(GPT& model, const std::vector<int32_t>& val, int B, int T, int eval_steps);

/// A trained model loaded from a run folder's checkpoint for sampling or evaluation.
struct LoadedModel {
  TrainConfig cfg;
  Tokenizer tokenizer;
  int64_t step = 0;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<GPT> model;
};
/// Loads the configuration, tokenizer and weights of run_dir's checkpoint into a model that
/// takes micro-batches of up to max_batch (0: the run's train.batch_size), on the run's
/// train.device with its train.threads; `sets` ("key=value") are applied to the configuration
/// (model.* keys excepted). A Hugging Face GPT-2 folder (config.json, model.safetensors) in
/// place of a run folder is read by load_hf_gpt2 (train/hf_gpt2.h). Throws gt::Error naming the
/// missing or invalid file.
LoadedModel load_model(const std::string& run_dir, int max_batch = 0,
                       const std::vector<std::string>& sets = {});

/// Peak resident memory of this process in bytes (VmHWM), 0 where unknown.
/// Peak resident bytes (VmHWM of /proc/self/status) since the process started or since the
/// Trainer reset the high-water mark after loading the data; 0 if unknown.
size_t peak_rss_bytes();
/// The process's resident memory now (VmRSS of /proc/self/status), bytes; 0 if unknown.
size_t current_rss_bytes();

}  // namespace gt
