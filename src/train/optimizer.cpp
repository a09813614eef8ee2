// train/optimizer.cpp: the optimizer step of trainer.h (gradient clipping and AdamW through the
// backend, with the inf/NaN checks of every step).
#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "train/trainer.h"

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

// Clipping and AdamW of the unfused fp32 path, given the global squared norm (finite).
void clip_and_update_finite(Backend& be, GPT& model, Arena& m, Arena& v, const TrainConfig& cfg,
                            float lr, int64_t t, double norm) {
  Arena& g = model.grads();
  if (cfg.grad_clip > 0) {
    double coef = cfg.grad_clip / (norm + 1e-6);
    if (coef < 1.0)
      for (size_t i = 0; i < g.size(); ++i)
        be.scale(g.at(i).f32(), static_cast<float>(coef), g.at(i).numel());
  }
  Arena& p = model.params();
  for (size_t i = 0; i < p.size(); ++i) {
    float wd = model.specs()[i].decay ? static_cast<float>(cfg.weight_decay) : 0.0f;
    be.adamw_update(p.at(i).f32(), g.at(i).f32(), m.at(i).f32(), v.at(i).f32(), p.at(i).numel(), lr,
                    static_cast<float>(cfg.beta1), static_cast<float>(cfg.beta2),
                    static_cast<float>(cfg.eps), wd, t);
  }
  be.weights_updated();
}

}  // namespace

OptimizerResult optimizer_step(Backend& be, GPT& model, Arena& m, Arena& v, const TrainConfig& cfg,
                               float lr, int64_t t, double loss_scale) {
  OptimizerResult r;
  Arena& g = model.grads();
  Arena& p = model.params();
  size_t bad = 0;
  const double sq = arena_sum_squares(be, g, &bad);
  if (!std::isfinite(sq)) {  // nothing changes: fp16 skips the step, fp32 and bf16 stop
    r.grad_norm = sq;
    r.skipped = true;
    r.nonfinite_tensor = bad < g.size() ? model.specs()[bad].name : std::string("?");
    return r;
  }
  r.grad_norm = std::sqrt(sq) / loss_scale;
  if (!cfg.fusion && loss_scale == 1.0) {
    clip_and_update_finite(be, model, m, v, cfg, lr, t, r.grad_norm);
    return r;
  }
  double mult = 1.0 / loss_scale;
  if (cfg.grad_clip > 0) {
    double coef = cfg.grad_clip / (r.grad_norm + 1e-6);
    if (coef < 1.0) mult *= coef;
  }
  const size_t n = p.size();
  if (cfg.fusion) {
    std::vector<float*> pp(n), mm(n), vv(n);
    std::vector<const float*> gg(n);
    std::vector<int64_t> cnt(n);
    std::vector<float> wd(n);
    for (size_t i = 0; i < n; ++i) {
      pp[i] = p.at(i).f32();
      gg[i] = g.at(i).f32();
      mm[i] = m.at(i).f32();
      vv[i] = v.at(i).f32();
      cnt[i] = p.at(i).numel();
      wd[i] = model.specs()[i].decay ? static_cast<float>(cfg.weight_decay) : 0.0f;
    }
    be.adamw_fused(pp.data(), gg.data(), mm.data(), vv.data(), cnt.data(), wd.data(), (int)n,
                   static_cast<float>(mult), lr, static_cast<float>(cfg.beta1),
                   static_cast<float>(cfg.beta2), static_cast<float>(cfg.eps), t);
  } else {
    if (mult != 1.0)
      for (size_t i = 0; i < n; ++i)
        be.scale(g.at(i).f32(), static_cast<float>(mult), g.at(i).numel());
    for (size_t i = 0; i < n; ++i) {
      float wd = model.specs()[i].decay ? static_cast<float>(cfg.weight_decay) : 0.0f;
      be.adamw_update(p.at(i).f32(), g.at(i).f32(), m.at(i).f32(), v.at(i).f32(), p.at(i).numel(),
                      lr, static_cast<float>(cfg.beta1), static_cast<float>(cfg.beta2),
                      static_cast<float>(cfg.eps), wd, t);
    }
  }
  be.weights_updated();
  return r;
}

const AdamStepResult* optimizer_step_async(Backend& be, GPT& model, Arena& m, Arena& v,
                                           const TrainConfig& cfg, float lr, int64_t t,
                                           double loss_scale) {
  Arena& g = model.grads();
  Arena& p = model.params();
  const size_t n = p.size();
  std::vector<float*> pp(n), mm(n), vv(n);
  std::vector<const float*> gg(n);
  std::vector<int64_t> cnt(n);
  std::vector<float> wd(n);
  for (size_t i = 0; i < n; ++i) {
    check(g.at(i).dtype == DType::f32, "optimizer_step_async: f32 gradients only");
    pp[i] = p.at(i).f32();
    gg[i] = g.at(i).f32();
    mm[i] = m.at(i).f32();
    vv[i] = v.at(i).f32();
    cnt[i] = p.at(i).numel();
    wd[i] = model.specs()[i].decay ? static_cast<float>(cfg.weight_decay) : 0.0f;
  }
  AdamStep s;
  s.p = pp.data();
  s.g = gg.data();
  s.m = mm.data();
  s.v = vv.data();
  s.n = cnt.data();
  s.wd = wd.data();
  s.count = static_cast<int>(n);
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
  clip_and_update_finite(be, model, m, v, cfg, lr, t, norm);
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
