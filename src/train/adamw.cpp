// train/adamw.cpp: the optimizer step of adamw.h (gradient clipping and AdamW through the
// backend, with the inf/NaN checks of every step).
#include "train/adamw.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "backend/adam_math.h"
#include "core/error.h"

namespace gt {
namespace {

// Sum of squares of every tensor of `a` in double through the backend (a float squared stays
// below 1.2e77, so only an inf or NaN element makes it non-finite); returns the total and sets
// *first_bad to the first tensor whose sum is not finite (a.size() when none). An all-f32 arena
// is summed in one pass over its flat memory (the 64-byte padding between tensors is zeroed at
// allocation and never written): one parallel region instead of one per tensor, which was 3.5 %
// of a shakespeare-char-cpu bf16 step (208 regions a step over the gradients, moments and
// weights). The per-tensor passes run only to name the tensor when the total is not finite.
double arena_sum_squares(Backend& be, Arena& a, size_t* first_bad) {
  *first_bad = a.size();
  bool flat = a.allocated() && a.size() > 1;
  for (size_t i = 0; flat && i < a.size(); ++i) flat = a.at(i).dtype == DType::f32;
  if (flat) {
    const double sq =
        be.sum_squares(static_cast<const float*>(a.base()), (int64_t)(a.bytes() / sizeof(float)));
    if (std::isfinite(sq)) return sq;
  }
  double sq = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double t = be.sum_squares(a.at(i).f32(), a.at(i).numel());
    if (!std::isfinite(t) && *first_bad == a.size()) *first_bad = i;
    sq += t;
  }
  return sq;
}

}  // namespace

AdamPieces::AdamPieces(std::vector<AdamPiece> pieces) : pieces_(std::move(pieces)) {
  for (const AdamPiece& pc : pieces_) {
    p_.push_back(pc.p);
    g_.push_back(pc.g);
    m_.push_back(pc.m);
    v_.push_back(pc.v);
    n_.push_back(pc.n);
    wd_.push_back(pc.weight_decay);
  }
}

AdamPieces whole_tensor_pieces(GPT& model, Arena& m, Arena& v, const TrainConfig& cfg) {
  Arena& p = model.params();
  Arena& g = model.grads();
  std::vector<AdamPiece> pieces(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    check(g.at(i).dtype == DType::f32, "the optimizer step: f32 gradients only");
    pieces[i] = {
        p.at(i).f32(),   g.at(i).f32(),
        m.at(i).f32(),   v.at(i).f32(),
        p.at(i).numel(), model.specs()[i].decay ? static_cast<float>(cfg.weight_decay) : 0.0f};
  }
  return AdamPieces(std::move(pieces));
}

void adamw_apply(Backend& be, const AdamPieces& pieces, double grad_mult, float lr,
                 const TrainConfig& cfg, bool fused, int64_t t) {
  const float b1 = static_cast<float>(cfg.beta1), b2 = static_cast<float>(cfg.beta2),
              eps = static_cast<float>(cfg.eps), mult = static_cast<float>(grad_mult);
  if (pieces.empty()) return;
  if (fused) {
    be.adamw_fused(pieces.p(), pieces.g(), pieces.m(), pieces.v(), pieces.n(), pieces.wd(),
                   pieces.count(), mult, lr, b1, b2, eps, t);
    return;
  }
  for (const AdamPiece& pc : pieces.pieces()) {
    // the unfused chain scales the gradient in place, then updates from it
    if (grad_mult != 1.0) be.scale(const_cast<float*>(pc.g), mult, pc.n);
    be.adamw_update(pc.p, pc.g, pc.m, pc.v, pc.n, lr, b1, b2, eps, pc.weight_decay, t);
  }
}

OptimizerResult optimizer_step(Backend& be, GPT& model, const AdamPieces& pieces,
                               const TrainConfig& cfg, float lr, int64_t t, double loss_scale) {
  OptimizerResult r;
  Arena& g = model.grads();
  size_t bad = 0;
  const double sq = arena_sum_squares(be, g, &bad);
  if (!std::isfinite(sq)) {  // nothing changes: fp16 skips the step, fp32 and bf16 stop
    r.grad_norm = sq;
    r.skipped = true;
    r.nonfinite_tensor = bad < g.size() ? model.specs()[bad].name : std::string("?");
    return r;
  }
  r.grad_norm = std::sqrt(sq) / loss_scale;
  adamw_apply(be, pieces, adam_grad_mult(sq, loss_scale, cfg.grad_clip), lr, cfg, cfg.fusion, t);
  be.weights_updated();
  return r;
}

OptimizerResult optimizer_step(Backend& be, GPT& model, Arena& m, Arena& v, const TrainConfig& cfg,
                               float lr, int64_t t, double loss_scale) {
  return optimizer_step(be, model, whole_tensor_pieces(model, m, v, cfg), cfg, lr, t, loss_scale);
}

const AdamStepResult* optimizer_step_async(Backend& be, GPT& model, const AdamPieces& pieces,
                                           const TrainConfig& cfg, float lr, int64_t t,
                                           double loss_scale) {
  Arena& g = model.grads();
  AdamStep s;
  s.p = pieces.p();
  s.g = pieces.g();
  s.m = pieces.m();
  s.v = pieces.v();
  s.n = pieces.n();
  s.wd = pieces.wd();
  s.count = pieces.count();
  // the flat gradient buffer: the padding between tensors is zeroed at allocation, never written
  s.grads = static_cast<const float*>(g.base());
  s.grads_n = static_cast<int64_t>(g.bytes() / sizeof(float));
  s.loss_scale = loss_scale;
  s.clip = cfg.grad_clip;
  s.lr = lr;
  s.beta1 = static_cast<float>(cfg.beta1);
  s.beta2 = static_cast<float>(cfg.beta2);
  s.eps = static_cast<float>(cfg.eps);
  s.t = t;
  const AdamStepResult* r = be.adamw_step(s);
  be.weights_updated();
  return r;
}

std::string first_nonfinite_gradient(Backend& be, GPT& model) {
  size_t bad = 0;
  arena_sum_squares(be, model.grads(), &bad);
  return bad < model.specs().size() ? model.specs()[bad].name : std::string("?");
}

double clip_and_update(Backend& be, GPT& model, Arena& m, Arena& v, const TrainConfig& cfg,
                       float lr, int64_t t) {
  size_t bad = 0;
  const double sq = arena_sum_squares(be, model.grads(), &bad);
  if (!std::isfinite(sq))
    throw Error(fmt::format(
        "the gradient of '{}' holds inf or NaN (global norm {}): the weights were not updated",
        bad < model.specs().size() ? model.specs()[bad].name : std::string("?"), sq));
  const double norm = std::sqrt(sq);
  // the plain chain: clip by scaling, then adamw_update per tensor
  adamw_apply(be, whole_tensor_pieces(model, m, v, cfg), adam_grad_mult(sq, 1.0, cfg.grad_clip), lr,
              cfg, /*fused=*/false, t);
  be.weights_updated();
  return norm;
}

std::string first_nonfinite_state(Backend& be, GPT& model, Arena& m, Arena& v) {
  size_t bad = 0;
  // in the order the update computes them: the moments, then the weights from them
  const std::pair<Arena*, const char*> arenas[] = {{&m, "AdamW's first moment (exp_avg) of "},
                                                   {&v, "AdamW's second moment (exp_avg_sq) of "},
                                                   {&model.params(), "parameter "}};
  for (auto [a, what] : arenas)
    if (!std::isfinite(arena_sum_squares(be, *a, &bad)) && bad < a->size())
      return fmt::format("{}'{}'", what, model.specs()[bad].name);
  return {};
}

}  // namespace gt
