// train/strategy.cpp: the one-process strategy of strategy.h.
#include "train/strategy.h"

#include <cmath>

#include "core/error.h"
#include "train/trainer.h"

namespace gt {
namespace {

class SingleProcess final : public TrainStrategy {
 public:
  explicit SingleProcess(StepContext ctx) : c_(ctx) {
    for (auto& s : c_.model.specs()) {
      c_.m.plan(s.name, s.shape);
      c_.v.plan(s.name, s.shape);
    }
    c_.m.allocate(c_.be);
    c_.v.allocate(c_.be);
    pieces_ = whole_tensor_pieces(c_.model, c_.m, c_.v, c_.cfg);
  }

  bool losses_on_device() const override { return c_.cfg.fusion; }

  OptimizerResult optimizer_step(float lr, int64_t t, double loss_scale) override {
    if (!c_.cfg.fusion)
      return gt::optimizer_step(c_.be, c_.model, pieces_, c_.cfg, lr, t, loss_scale);
    queue_optimizer_step(lr, t, loss_scale);
    return finish_optimizer_step(loss_scale);
  }

  // the norm, the clip and the skip decided on the device; the step's one host
  // synchronization brings back its result and the losses
  void queue_optimizer_step(float lr, int64_t t, double loss_scale) override {
    if (!c_.cfg.fusion) TrainStrategy::queue_optimizer_step(lr, t, loss_scale);
    queued_ = optimizer_step_async(c_.be, c_.model, pieces_, c_.cfg, lr, t, loss_scale);
  }
  OptimizerResult finish_optimizer_step(double loss_scale) override {
    check(queued_ != nullptr, "finish_optimizer_step() without queue_optimizer_step()");
    const AdamStepResult* r = queued_;
    queued_ = nullptr;
    c_.be.synchronize();
    OptimizerResult opt;
    opt.skipped = !std::isfinite(r->norm_sq);
    opt.grad_norm = opt.skipped ? r->norm_sq : std::sqrt(r->norm_sq) / loss_scale;
    if (opt.skipped) opt.nonfinite_tensor = first_nonfinite_gradient(c_.be, c_.model);
    opt.nonfinite_state = r->nonfinite_state;
    return opt;
  }

  std::string nonfinite_state() override {
    return first_nonfinite_state(c_.be, c_.model, c_.m, c_.v);
  }

  void load_checkpoint(const std::string& run_dir) override {
    load_checkpoint_tensors(run_dir, c_.model, &c_.m, &c_.v);
  }

  void save_checkpoint(const std::string& run_dir, const CheckpointState& st) override {
    gt::save_checkpoint(run_dir, c_.model, c_.m, c_.v, st);
  }

  double evaluate(const std::vector<int32_t>& val, int B, int T, int eval_steps) override {
    return evaluate_loss(c_.model, val, B, T, eval_steps);
  }

 private:
  StepContext c_;
  const AdamStepResult* queued_ = nullptr;  ///< the queued step's result (backend memory)
  AdamPieces pieces_;  // every parameter whole, built once: the arenas never move
};

}  // namespace

void TrainStrategy::queue_optimizer_step(float, int64_t, double) {
  throw Error(
      "queue_optimizer_step(): this strategy's step does not keep its losses on the device");
}
OptimizerResult TrainStrategy::finish_optimizer_step(double) {
  throw Error(
      "finish_optimizer_step(): this strategy's step does not keep its losses on the device");
}

std::unique_ptr<TrainStrategy> make_single_process(StepContext ctx) {
  return std::make_unique<SingleProcess>(ctx);
}

}  // namespace gt
