// train/adamw.h: the optimizer step: the global gradient norm, clipping, the fp16 loss
// scale's undo and AdamW, through the backend. One AdamW loop (adamw_apply) serves every mode:
// whole tensors in one process or with data parallelism, a rank's shard under ZeRO-1.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/gpt.h"
#include "train/config.h"

namespace gt {

/// The part of one parameter tensor that an AdamW pass updates: n floats at p (weights), g
/// (their gradients), m and v (AdamW's first and second moments), with the tensor's weight
/// decay (train.weight_decay for matrices, 0 for biases, norms and the position table).
struct AdamPiece {
  float* p = nullptr;
  const float* g = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  int64_t n = 0;
  float weight_decay = 0;
};

/// The pieces of an AdamW pass, laid out once both as AdamPiece and as the arrays
/// Backend::adamw_fused and AdamStep take (piece i at index i). The pointers stay valid as long
/// as the arenas they point into, which are allocated once for a run, so a strategy builds its
/// pieces once and every optimizer step reuses them.
class AdamPieces {
 public:
  AdamPieces() = default;
  explicit AdamPieces(std::vector<AdamPiece> pieces);
  const std::vector<AdamPiece>& pieces() const { return pieces_; }
  int count() const { return static_cast<int>(pieces_.size()); }
  bool empty() const { return pieces_.empty(); }
  /// The arrays of count() entries: weights, gradients, moments, sizes, weight decays.
  float* const* p() const { return p_.data(); }
  const float* const* g() const { return g_.data(); }
  float* const* m() const { return m_.data(); }
  float* const* v() const { return v_.data(); }
  const int64_t* n() const { return n_.data(); }
  const float* wd() const { return wd_.data(); }

 private:
  std::vector<AdamPiece> pieces_;
  std::vector<float*> p_, m_, v_;
  std::vector<const float*> g_;
  std::vector<int64_t> n_;
  std::vector<float> wd_;
};

/// The pieces of every parameter of `model`, whole, with m and v laid out tensor for tensor
/// like model.params() (allocated). Throws gt::Error when the gradients are not f32.
AdamPieces whole_tensor_pieces(GPT& model, Arena& m, Arena& v, const TrainConfig& cfg);

/// The one AdamW loop: every piece updated at step t (from 1) and learning rate lr with
/// cfg's train.beta1, beta2 and eps, the gradients multiplied by grad_mult (adam_grad_mult() in
/// backend/adam_math.h). fused (train.fusion in a training step; cfg.fusion is not read): one
/// Backend::adamw_fused pass over all pieces; not fused: Backend::scale (when grad_mult != 1) and
/// adamw_update per piece (the unfused chain: the gradients are left scaled). Does not mark the
/// weight copies stale (the caller does, once every piece is done).
void adamw_apply(Backend& be, const AdamPieces& pieces, double grad_mult, float lr,
                 const TrainConfig& cfg, bool fused, int64_t t);

/// Clips the gradients of `model` to cfg.grad_clip (global L2 norm, as
/// torch.nn.utils.clip_grad_norm_: scale by clip/(norm+1e-6) when that is below 1) and
/// applies one AdamW step at learning rate lr, decaying matrices only; t counts steps from 1.
/// m and v hold the moments, tensor for tensor like model.params(). Returns the norm before
/// clipping. Throws gt::Error naming the first gradient tensor that holds inf or NaN (nothing
/// is changed then).
double clip_and_update(Backend& be, GPT& model, Arena& m, Arena& v, const TrainConfig& cfg,
                       float lr, int64_t t);

/// What optimizer_step() did.
struct OptimizerResult {
  double grad_norm = 0;          ///< global L2 norm of the unscaled gradients before clipping
  bool skipped = false;          ///< true when a gradient was inf or NaN: nothing was changed
  std::string nonfinite_tensor;  ///< when skipped: the first such gradient's parameter name
  /// Whether the update made an AdamW moment or a weight inf or NaN: 0 no, 1 yes (both as the
  /// device checked them), -1 not checked (the caller checks with first_nonfinite_state()).
  int nonfinite_state = -1;
};
/// The precision-aware optimizer step: the gradients hold loss_scale times the true ones;
/// when any is inf or NaN nothing changes and the result says skipped; otherwise they are
/// unscaled, clipped (cfg.grad_clip) and AdamW is applied at step t (adamw_apply) to `pieces`
/// (whole_tensor_pieces(), built once for the run). Marks the backend's 16-bit weight copies
/// stale.
OptimizerResult optimizer_step(Backend& be, GPT& model, const AdamPieces& pieces,
                               const TrainConfig& cfg, float lr, int64_t t,
                               double loss_scale = 1.0);
/// optimizer_step() over whole_tensor_pieces(model, m, v, cfg), laid out for this one call.
OptimizerResult optimizer_step(Backend& be, GPT& model, Arena& m, Arena& v, const TrainConfig& cfg,
                               float lr, int64_t t, double loss_scale = 1.0);

/// optimizer_step() with fusion on, without a host synchronization (Backend::adamw_step): the
/// norm, the clip factor, the skip when a gradient is inf or NaN and AdamW all on the device;
/// the result (host memory of the backend) is read after the backend's next synchronize().
/// pieces: whole_tensor_pieces(). Marks the 16-bit weight copies stale.
const AdamStepResult* optimizer_step_async(Backend& be, GPT& model, const AdamPieces& pieces,
                                           const TrainConfig& cfg, float lr, int64_t t,
                                           double loss_scale = 1.0);
/// The name of the first parameter whose gradient holds inf or NaN ("?" when none does).
std::string first_nonfinite_gradient(Backend& be, GPT& model);

/// The first AdamW moment (m, then v) or parameter of `model` that holds inf or NaN, as
/// "parameter 'h.0.attn.c_attn.weight'" or "AdamW's second moment (exp_avg_sq) of 'wte.weight'";
/// empty when all are finite. One sum_squares pass over each arena through the backend.
std::string first_nonfinite_state(Backend& be, GPT& model, Arena& m, Arena& v);

}  // namespace gt
