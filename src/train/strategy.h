// train/strategy.h: how a training step's gradients become an update, one object per mode:
//   one process              AdamW's whole state here; with train.fusion on, the step talks
//                            to the device's host once (the losses and the update's result
//                            come back at its end);
//   data parallel (zero = 0) the gradients reduced in buckets during the backward
//                            (dist/grad_sync.h), AdamW's whole state on every rank;
//   ZeRO-1 (zero = 1)        each rank keeps and updates its shard of AdamW's state and the
//                            weights are all-gathered after the update (Rajbhandari et al. 2020).
// The Trainer (trainer.h) owns the data, the model, the loop and the run folder; a strategy owns
// what differs between the modes: AdamW's state, the gradient reduction, checkpoints of that
// state, the sharded evaluation and the "dist" record of summary.json.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "dist/communicator.h"
#include "model/gpt.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/config.h"

namespace gt {

/// What a strategy works on; the Trainer owns all of it and outlives the strategy. m and v
/// (AdamW's moments) are empty arenas the strategy plans and allocates.
struct StepContext {
  Backend& be;
  GPT& model;
  const TrainConfig& cfg;
  Arena& m;
  Arena& v;
};

class TrainStrategy {
 public:
  virtual ~TrainStrategy() = default;
  /// This process's rank and the number of ranks (0 and 1 for one process).
  virtual int rank() const { return 0; }
  virtual int world() const { return 1; }
  /// Whether the step's losses stay on the device (GPT::forward_step) until optimizer_step()'s
  /// host synchronization; then they are read with GPT::step_loss after it.
  virtual bool losses_on_device() const { return false; }
  /// Called before and after the backward of a step's last micro-batch (a data-parallel
  /// strategy reduces each bucket of gradients as soon as the backward has finished it).
  virtual void begin_last_backward() {}
  virtual void end_last_backward() {}
  /// After the backward: waits for the gradient reduction and returns the step's loss (summed
  /// over this process's micro-batches) as the mean over ranks; `stop_signal` holds a signal
  /// this process received (0: none), read after the wait so that one arriving during it
  /// belongs to this step; every rank then agrees on it (stop_signal()).
  virtual double reduce_step(double loss, const std::atomic<int>& stop_signal) { return loss; }
  /// The signal that stops the run: `local` (this process's) with one process; with several
  /// ranks the largest any rank had at the end of the last step, so that all stop together.
  virtual int stop_signal(int local) const { return local; }
  /// Forgets the agreed signal of an earlier run() (called at the start of each run(), when
  /// this process's own signal is cleared too).
  virtual void clear_stop_signal() {}
  /// The optimizer step at AdamW step t (from 1) and learning rate lr, the gradients holding
  /// loss_scale times the true ones (optimizer_step() in train/adamw.h). Marks the weight
  /// copies stale.
  virtual OptimizerResult optimizer_step(float lr, int64_t t, double loss_scale) = 0;
  /// optimizer_step() in two halves, where losses_on_device(): queue_optimizer_step() queues
  /// the update without a host synchronization (so that it can be captured in the step's
  /// graph), finish_optimizer_step() synchronizes and reads its result. Errors: gt::Error from
  /// a strategy whose losses are not on the device.
  virtual void queue_optimizer_step(float lr, int64_t t, double loss_scale);
  virtual OptimizerResult finish_optimizer_step(double loss_scale);
  /// The first AdamW moment or parameter that holds inf or NaN, named; empty when none
  /// (first_nonfinite_state()). Every rank takes part.
  virtual std::string nonfinite_state() = 0;
  /// Loads the weights and AdamW's state of run_dir's checkpoint (load_checkpoint_tensors).
  virtual void load_checkpoint(const std::string& run_dir) = 0;
  /// Writes the checkpoint (save_checkpoint): rank 0 writes, every rank takes part; returns
  /// when it is on disk.
  virtual void save_checkpoint(const std::string& run_dir, const CheckpointState& st) = 0;
  /// The mean validation loss over eval_steps batches of (B, T) of `val` (eval_batch order; with
  /// several ranks rank r evaluates batches r, r + N, ... and the sum is reduced).
  virtual double evaluate(const std::vector<int32_t>& val, int B, int T, int eval_steps) = 0;
  /// summary.json's "dist" record (RunResult::dist); null for one process. Every rank takes part.
  virtual nlohmann::json summary() { return nullptr; }
};

/// One process. Plans and allocates ctx.m and ctx.v tensor for tensor like the parameters.
std::unique_ptr<TrainStrategy> make_single_process(StepContext ctx);

/// Data parallelism over comm (two or more ranks): ZeRO-1 when ctx.cfg.zero = 1, gradients over
/// NCCL where the backend's memory is not host-readable and the build has NCCL (else staged
/// through host memory), train.grad_comm on the wire. Plans and allocates ctx.m and ctx.v
/// (this rank's shard under ZeRO-1). Throws gt::Error as GradSync does.
std::unique_ptr<TrainStrategy> make_data_parallel(StepContext ctx, dist::Communicator& comm);

}  // namespace gt
