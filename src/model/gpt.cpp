// model/gpt.cpp: GPT-2 forward and backward over the backend op table, with the
// activation-recompute policies of DESIGN.md:
//   none     every activation a block's backward needs is stored per layer;
//   gelu     the GELU output is recomputed from its input (one shared buffer; with fusion
//            on, its derivative too);
//   gelu+ln  also both LayerNorm outputs (means and 1/std stay stored per layer);
//   block    only each block's input is stored; the whole block is re-run forward.
// Recomputation uses the same kernels as the forward pass, so gradients are bitwise
// the same under every policy. With fusion on, the GELU pass also writes gelu' of the
// pre-activation (fch_dgelu) and mlp.c_proj's backward multiplies by it as a post-op of its
// product, so the pre-activation itself is kept only when a policy recomputes from it; or,
// where the backend saves the GELU's input (CUDA: cuBLASLt's GELU_AUX_BIAS and DGELU
// epilogues) and no policy recomputes, c_fc's product writes the pre-activation itself into
// fch_dgelu and the backward's product applies gelu' to it. The memory plan: gpt_plan.cpp.
// (Under bf16 with bf16 activations, the bf16 GELU output and bf16 gelu' that `none` keeps
// take as many bytes as the f32 pre-activation that `gelu` keeps instead: there `gelu` saves
// no memory over `none`, only costs the recomputation; gelu+ln and block still save.)
#include "model/gpt.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "model/gpt_plan.h"

namespace gt {

namespace {
// Box-Muller normal sampler on a fixed generator, so weights are the same on every platform.
struct Normal {
  std::mt19937_64 gen;
  explicit Normal(uint64_t seed) : gen(seed) {}
  double uniform() { return (gen() >> 11) * 0x1.0p-53; }
  float operator()(float std) {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return static_cast<float>(std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2));
  }
};
}  // namespace

using gpt_plan::gelu_input_saved;
using gpt_plan::layer_views;
using gpt_plan::plan_arenas;
using gpt_plan::Plans;
using gpt_plan::qkv_bf16;
using gpt_plan::validate;

GPT::GPT(const GPTConfig& cfg, int max_batch, Recompute rc, Backend& be, bool fused,
         bool bf16_activations)
    : cfg_(cfg),
      max_batch_(max_batch),
      rc_(rc),
      be_(be),
      fused_(fused),
      bf16_acts_(bf16_activations && be.precision() == Precision::bf16),
      planned_bf16_(be.precision() == Precision::bf16) {
  validate(cfg, max_batch);
  check_supports(be, gpt_ops(fused), be.precision());  // refuse now, not mid-step
  specs_ = gpt_param_specs(cfg);
  params_ = std::make_unique<Arena>("parameters");
  grads_ = std::make_unique<Arena>("gradients");
  acts_ = std::make_unique<Arena>("activations");
  scratch_ = std::make_unique<Arena>("scratch");
  Plans p = plan_arenas(cfg, max_batch, rc, fused, bf16_acts_, planned_bf16_,
                        qkv_bf16(cfg, fused, bf16_acts_, be), gelu_input_saved(rc, fused, be),
                        specs_, *params_, *grads_, *acts_, *scratch_);
  params_->allocate(be);
  grads_->allocate(be);
  acts_->allocate(be);
  scratch_->allocate(be);
  pv_ = parameter_views(*params_, cfg);
  gv_ = parameter_views(*grads_, cfg);
  auto A = [&](size_t i) { return acts_->at(i).f32(); };
  for (int l = 0; l < cfg.n_layer; ++l) layers_.push_back(layer_views(*acts_, p, l));
  x0_ = A(p.resid_idx[0]);
  lnf_ = DevPtr(acts_->at(p.lnf));
  lnf_mean_ = A(p.lnf_mean);
  lnf_rstd_ = A(p.lnf_rstd);
  logits_ = DevPtr(acts_->at(p.logits));
  probs_ = fused ? nullptr : A(p.probs);  // (unfused: logits_ is f32)
  losses_ = A(p.losses);
  inputs_ = static_cast<int32_t*>(acts_->at(p.inputs).data);
  targets_ = static_cast<int32_t*>(acts_->at(p.targets).data);
  auto S = [&](size_t i) { return scratch_->at(i).f32(); };
  dres_ = S(p.dres);
  dC_ = S(p.dC);
  dqkv_ = DevPtr(scratch_->at(p.dqkv));
  d4C_ = DevPtr(scratch_->at(p.d4C));
  if (p.d4C16 != SIZE_MAX) d4C16_ = DevPtr(scratch_->at(p.d4C16));
  dlogits_ = fused ? logits_ : DevPtr(S(p.dlogits));
  tmpC_ = S(p.tmpC);
  plan_.params_bytes = params_->bytes();
  plan_.grads_bytes = grads_->bytes();
  plan_.optimizer_bytes = 2 * params_->bytes();
  plan_.activations_bytes = acts_->bytes();
  plan_.scratch_bytes = scratch_->bytes();
  plan_.workspace_bytes =
      be.workspace_bytes(workspace_query(cfg, max_batch, be.precision(), fused, bf16_activations));
}

GPT::~GPT() {
  for (Slot& s : slots_) {
    be_.deallocate_host(s.inputs);
    be_.deallocate_host(s.targets);
    be_.deallocate_host(s.losses);
  }
}

void GPT::init_weights(uint64_t seed) {
  Normal normal(seed);
  const float proj_std = 0.02f / std::sqrt(2.0f * cfg_.n_layer);
  std::vector<float> host;
  for (size_t i = 0; i < specs_.size(); ++i) {
    const std::string& n = specs_[i].name;
    host.assign(specs_[i].shape.numel(), 0.0f);  // biases stay zero
    bool is_ln_weight = n.find("ln_") != std::string::npos && n.ends_with(".weight");
    if (is_ln_weight) {
      std::fill(host.begin(), host.end(), 1.0f);
    } else if (!n.ends_with(".bias")) {
      float std = n.ends_with("c_proj.weight") ? proj_std : 0.02f;
      for (float& x : host) x = normal(std);
    }
    be_.upload(params_->at(i), host.data());
  }
  be_.weights_updated();
}

std::vector<float> GPT::logits() const {
  const size_t n = (size_t)lastB_ * lastT_ * cfg_.vocab_size;
  std::vector<float> h(n);
  if (!logits_.bf16()) {
    be_.copy_to_host(h.data(), logits_.data, n * sizeof(float));
    return h;
  }
  std::vector<uint16_t> b(n);
  be_.copy_to_host(b.data(), logits_.data, n * sizeof(uint16_t));
  for (size_t i = 0; i < n; ++i) h[i] = bf16_to_float(b[i]);
  return h;
}
std::vector<float> GPT::losses() const {
  std::vector<float> h((size_t)lastB_ * lastT_);
  be_.copy_to_host(h.data(), losses_, h.size() * sizeof(float));
  return h;
}

// The unfused block (train.fusion=off), one op per elementary step:
//   x -> ln1 -> c_attn -> attention -> attn.c_proj -> + x = res2
//     -> ln2 -> c_fc -> gelu -> mlp.c_proj -> + res2 = out
void GPT::block_forward_unfused(int l, int B, int T) {
  const int C = cfg_.n_embd, NH = cfg_.n_head;
  const int64_t N = (int64_t)B * T;
  LayerActivations& L = layers_[l];
  const LayerParams& w = pv_.h[l];
  be_.layernorm_forward(L.ln1, L.ln1_mean, L.ln1_rstd, L.x, w.ln1_w, w.ln1_b, N, C);  // (N, C)
  be_.matmul_forward(L.qkv.f32(), L.ln1, w.qkv_w, w.qkv_b, N, C, 3 * C);              // qkv (N, 3C)
  be_.attention_forward(L.atty, L.att, L.qkv.f32(), B, T, C, NH);        // atty, att (B, NH, T, T)
  be_.matmul_forward(tmpC_, L.atty, w.attproj_w, w.attproj_b, N, C, C);  // (N, C)
  be_.residual_forward(L.res2, L.x, tmpC_, N * C);                       // res2 (N, C)
  be_.layernorm_forward(L.ln2, L.ln2_mean, L.ln2_rstd, L.res2, w.ln2_w, w.ln2_b, N, C);  // (N, C)
  be_.matmul_forward(L.fch, L.ln2, w.fc_w, w.fc_b, N, C, 4 * C);               // fch (N, 4C)
  mlp_gelu(L, N * 4 * C, false);                                               // fch_gelu (N, 4C)
  be_.matmul_forward(tmpC_, L.fch_gelu, w.fcproj_w, w.fcproj_b, N, 4 * C, C);  // (N, C)
  be_.residual_forward(L.out, L.res2, tmpC_, N * C);                           // out (N, C)
}

// The fused block (train.fusion=on): each residual add is fused with the LayerNorm that reads
// its result (ln_2 of this block; ln_1 of the next block or ln_f, so a block's own ln1 was
// written by the block before it, except for block 0), attention keeps only the log-sum-exp,
// the GELU pass also writes gelu' for the backward. When a block is re-run for recomputation
// it computes its own ln1 and writes only its residual output (the next block's buffers are
// not touched).
GPT::LayernormOut GPT::layernorm_after(int l) {
  if (l + 1 == cfg_.n_layer) return {lnf_, lnf_mean_, lnf_rstd_, pv_.lnf_w, pv_.lnf_b};
  const LayerActivations& nx = layers_[l + 1];
  return {nx.ln1, nx.ln1_mean, nx.ln1_rstd, pv_.h[l + 1].ln1_w, pv_.h[l + 1].ln1_b};
}

void GPT::block_forward_fused(int l, int B, int T, bool ln1_ready, const LayernormOut* next) {
  const int C = cfg_.n_embd, NH = cfg_.n_head;
  const int64_t N = (int64_t)B * T;
  LayerActivations& L = layers_[l];
  const LayerParams& w = pv_.h[l];
  const bool recomputing = next == nullptr;
  if (!ln1_ready)
    be_.layernorm_forward(L.ln1, L.ln1_mean, L.ln1_rstd, L.x, w.ln1_w, w.ln1_b, N, C);  // ln1
  be_.matmul_forward(L.qkv, L.ln1, w.qkv_w, w.qkv_b, N, C, 3 * C);       // qkv (N, 3C)
  be_.attention_forward_fused(L.atty, L.att, L.qkv, B, T, C, NH);        // atty, lse (B, NH, T)
  be_.matmul_forward(tmpC_, L.atty, w.attproj_w, w.attproj_b, N, C, C);  // (N, C)
  // res2, ln2 (N, C)
  be_.residual_layernorm_forward(L.res2, L.ln2, L.ln2_mean, L.ln2_rstd, L.x, tmpC_, w.ln2_w,
                                 w.ln2_b, N, C);
  if (!for_backward_) {  // no backward follows: c_fc and its GELU as one product
    be_.matmul_gelu_forward(L.fch_gelu, L.ln2, w.fc_w, w.fc_b, N, C, 4 * C);  // (N, 4C)
  } else if (saves_gelu_input() && !recomputing) {  // fch_gelu, and fch itself as fch_dgelu
    be_.matmul_gelu_forward(L.fch_gelu, L.fch_dgelu, L.ln2, w.fc_w, w.fc_b, N, C, 4 * C);
  } else if (rc_ == Recompute::none || recomputing) {  // fch_gelu, fch_dgelu; fch only as
    // scratch (no policy recomputes the GELU from it): the backend may apply both in the
    // product's epilogue and never write it
    be_.matmul_gelu_forward_fused(L.fch_gelu, L.fch_dgelu, L.fch, L.ln2, w.fc_w, w.fc_b, N, C,
                                  4 * C);
  } else {  // fch (N, 4C) kept: the policy recomputes gelu' from it in the backward
    be_.matmul_forward(L.fch, L.ln2, w.fc_w, w.fc_b, N, C, 4 * C);
    mlp_gelu(L, N * 4 * C, false);  // fch_gelu
  }
  be_.matmul_forward(tmpC_, L.fch_gelu, w.fcproj_w, w.fcproj_b, N, 4 * C, C);  // (N, C)
  if (next)  // out, and the layernorm it feeds
    be_.residual_layernorm_forward(L.out, next->out, next->mean, next->rstd, L.res2, tmpC_, next->w,
                                   next->b, N, C);
  else
    be_.residual_forward(L.out, L.res2, tmpC_, N * C);  // out (N, C)
}

float GPT::forward(const int32_t* inputs, const int32_t* targets, int B, int T, bool for_backward) {
  forward_impl(inputs, targets, B, T, for_backward, 1.0f, -1);
  if (!targets) return NAN;
  const int64_t N = (int64_t)B * T;
  std::vector<float> losses(N);
  be_.copy_to_host(losses.data(), losses_, sizeof(float) * N);
  double sum = 0.0;
  for (float x : losses) sum += x;
  return static_cast<float>(sum / N);
}

void GPT::forward_step(const int32_t* inputs, const int32_t* targets, int B, int T, float dloss,
                       int slot) {
  check(targets && slot >= 0, "forward_step: a training forward needs targets and a slot >= 0");
  forward_impl(inputs, targets, B, T, true, dloss, slot);
}

double GPT::step_loss(int slot) const {
  check(slot >= 0 && slot < (int)slots_.size() && slots_[slot].n > 0,
        fmt::format("step_loss: no forward_step filled slot {}", slot));
  const Slot& s = slots_[slot];
  double sum = 0.0;
  for (int64_t i = 0; i < s.n; ++i) sum += s.losses[i];
  return static_cast<float>(sum / s.n);
}

GPT::Slot& GPT::slot(int k, int64_t n) {
  if ((int)slots_.size() <= k) slots_.resize(k + 1);
  Slot& s = slots_[k];
  if (s.cap < n) {
    be_.deallocate_host(s.inputs);
    be_.deallocate_host(s.targets);
    be_.deallocate_host(s.losses);
    s.inputs = s.targets = nullptr;
    s.losses = nullptr;
    s.inputs = static_cast<int32_t*>(be_.allocate_host(sizeof(int32_t) * n));
    s.targets = static_cast<int32_t*>(be_.allocate_host(sizeof(int32_t) * n));
    s.losses = static_cast<float*>(be_.allocate_host(sizeof(float) * n));
    s.cap = n;
  }
  s.n = n;
  return s;
}

void GPT::forward_impl(const int32_t* inputs, const int32_t* targets, int B, int T,
                       bool for_backward, float dloss, int slot_index) {
  check(B > 0 && B <= max_batch_,
        fmt::format("forward: batch {} outside [1, {}] planned for", B, max_batch_));
  check(T > 0 && T <= cfg_.block_size,
        fmt::format("forward: sequence length {} outside [1, model.block_size = {}]", T,
                    cfg_.block_size));
  const int C = cfg_.n_embd, V = cfg_.vocab_size;
  const int64_t N = (int64_t)B * T;
  for (int64_t i = 0; i < N; ++i)  // `inputs` is the caller's host memory
    check(inputs[i] >= 0 && inputs[i] < V,
          fmt::format("input token {} at position {} is outside the vocabulary [0, {})", inputs[i],
                      i, V));
  Slot* sl = slot_index >= 0 ? &slot(slot_index, N) : nullptr;
  if (sl) {  // through pinned memory, no host synchronization; the backend keeps the ids
    std::copy(inputs, inputs + N, sl->inputs);
    be_.copy_to_device_async(inputs_, sl->inputs, sizeof(int32_t) * N);
  } else {
    be_.copy_to_device(inputs_, inputs, sizeof(int32_t) * N);
  }
  be_.host_tokens(inputs_, inputs, N);
  check_precision();  // the tensors' types were planned for the backend's precision
  lastB_ = B;
  lastT_ = T;
  have_targets_ = targets != nullptr;
  for_backward_ = for_backward;
  be_.embedding_forward(x0_, inputs_, pv_.wte, pv_.wpe, B, T, C);  // x0 (N, C)
  for (int l = 0; l < cfg_.n_layer; ++l) {
    if (fused_) {  // its output and the next layernorm in one pass, as llm.c
      const LayernormOut next = layernorm_after(l);
      block_forward_fused(l, B, T, /*ln1_ready=*/l > 0, &next);
    } else {
      block_forward_unfused(l, B, T);
    }
  }
  float* xL = cfg_.n_layer ? layers_.back().out : x0_;
  if (!fused_ || cfg_.n_layer == 0)  // (fused: the last block wrote ln_f)
    be_.layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, xL, pv_.lnf_w, pv_.lnf_b, N, C);  // (N, C)
  be_.matmul_forward(logits_, lnf_, pv_.wte, nullptr, N, C, V,
                     /*w_transposed=*/true);  // logits (N, V) = ln_f @ wte^T
  if (!targets) return;
  if (sl) {
    std::copy(targets, targets + N, sl->targets);
    be_.copy_to_device_async(targets_, sl->targets, sizeof(int32_t) * N);
  } else {
    be_.copy_to_device(targets_, targets, sizeof(int32_t) * N);
  }
  be_.host_tokens(targets_, targets, N);
  folded_dloss_ = fused_ ? dloss : 1.0f;
  if (fused_)  // logits_ now holds (softmax - onehot) * dloss, the logits' gradient
    be_.softmax_crossentropy_fused(logits_, losses_, targets_, dloss, N, V);  // losses (N)
  else
    be_.softmax_crossentropy_forward(probs_, losses_, logits_.f32(), targets_, N, V);  // (N, V)
  if (sl) be_.copy_to_host_async(sl->losses, losses_, sizeof(float) * N);
}

// gelu_input_saved() of this model.
bool GPT::saves_gelu_input() const { return gelu_input_saved(rc_, fused_, be_); }

// fch_gelu = gelu(fch), n elements; with fusion on also fch_dgelu = gelu'(fch) if with_dgelu.
void GPT::mlp_gelu(LayerActivations& L, int64_t n, bool with_dgelu) {
  if (fused_)
    be_.gelu_forward_fused(L.fch_gelu, with_dgelu ? L.fch_dgelu : nullptr, L.fch, n);
  else
    be_.gelu_forward(L.fch_gelu, L.fch, n);
}

// The bf16 tensors of the plan (bf16 activations, fch_dgelu) belong to precision bf16: the
// backend must still run the precision the model was planned for.
void GPT::check_precision() const {
  check((be_.precision() == Precision::bf16) == planned_bf16_,
        fmt::format("GPT: the backend's precision changed to {} after the model was planned for "
                    "{}; build the model again",
                    to_string(be_.precision()), planned_bf16_ ? "bf16" : "another precision"));
}

void GPT::zero_grad() { grads_->zero(); }

void GPT::recompute_for_backward(int l, int B, int T) {
  const int C = cfg_.n_embd;
  const int64_t N = (int64_t)B * T;
  LayerActivations& L = layers_[l];
  const LayerParams& w = pv_.h[l];
  switch (rc_) {
    case Recompute::none:
      break;
    case Recompute::gelu_ln:
      be_.layernorm_forward(L.ln1, L.ln1_mean, L.ln1_rstd, L.x, w.ln1_w, w.ln1_b, N, C);
      be_.layernorm_forward(L.ln2, L.ln2_mean, L.ln2_rstd, L.res2, w.ln2_w, w.ln2_b, N, C);
      [[fallthrough]];
    case Recompute::gelu:
      mlp_gelu(L, N * 4 * C, true);
      break;
    case Recompute::block:
      if (fused_)  // its ln_1 again, and out alone (the next block's ln_1 is kept)
        block_forward_fused(l, B, T, /*ln1_ready=*/false, /*next=*/nullptr);
      else
        block_forward_unfused(l, B, T);
      break;
  }
}

// The backward of one block; dres_ (N, C) holds d(out) on entry and d(x) on return. The
// unfused block (train.fusion=off), the reverse of block_forward_unfused.
void GPT::block_backward_unfused(int l, int B, int T) {
  const int C = cfg_.n_embd, NH = cfg_.n_head;
  const int64_t N = (int64_t)B * T;
  const LayerActivations& L = layers_[l];
  const LayerParams& w = pv_.h[l];
  LayerParams& g = gv_.h[l];
  // MLP: out = res2 + c_proj(gelu(c_fc(ln2(res2)))); d4C (N, 4C) = dres @ fcproj_w^T, then
  // d(fch) = d4C * gelu'(fch): in place, or into d4C16 (bf16 under bf16 activations)
  be_.matmul_backward(d4C_.f32(), g.fcproj_w, g.fcproj_b, dres_, L.fch_gelu, w.fcproj_w, N, 4 * C,
                      C);
  const DevPtr dfch = d4C16_ ? d4C16_ : d4C_;
  be_.gelu_backward(dfch, L.fch, d4C_.f32(), N * 4 * C);
  mlp_input_backward(l, dfch, N);
  // attention: res2 = x + c_proj(attn(c_attn(ln1(x))))
  be_.matmul_backward(dC_, g.attproj_w, g.attproj_b, dres_, L.atty, w.attproj_w, N, C,
                      C);                                               // d(atty)
  be_.attention_backward(dqkv_, dC_, L.qkv.f32(), L.att, B, T, C, NH);  // dqkv (N, 3C)
  attention_input_backward(l, N);
}

// The fused block's backward (train.fusion=on), the reverse of block_forward_fused; dres_ as
// block_backward_unfused's.
void GPT::block_backward_fused(int l, int B, int T) {
  const int C = cfg_.n_embd, NH = cfg_.n_head;
  const int64_t N = (int64_t)B * T;
  const LayerActivations& L = layers_[l];
  const LayerParams& w = pv_.h[l];
  LayerParams& g = gv_.h[l];
  // MLP: d(fch) = d4C (N, 4C) = (dres @ fcproj_w^T) * gelu'(fch), one product
  be_.matmul_backward_gelu(d4C_, g.fcproj_w, g.fcproj_b, dres_, L.fch_gelu, w.fcproj_w, L.fch_dgelu,
                           saves_gelu_input() ? GeluSaved::input : GeluSaved::derivative, N, 4 * C,
                           C);
  mlp_input_backward(l, d4C_, N);
  // attention
  be_.matmul_backward(dC_, g.attproj_w, g.attproj_b, dres_, L.atty, w.attproj_w, N, C,
                      C);                                                       // d(atty)
  be_.attention_backward_fused(dqkv_, dC_, L.qkv, L.atty, L.att, B, T, C, NH);  // dqkv (N, 3C)
  attention_input_backward(l, N);
}

// Block l's c_fc and ln_2 backward from dfch = d(fch) (N, 4C): dres (N, C) += d(res2); then the
// MLP half of the block's gradients are final (grad_groups()).
void GPT::mlp_input_backward(int l, DevPtr dfch, int64_t N) {
  const int C = cfg_.n_embd;
  const LayerActivations& L = layers_[l];
  const LayerParams& w = pv_.h[l];
  LayerParams& g = gv_.h[l];
  be_.matmul_backward(dC_, g.fc_w, g.fc_b, dfch, L.ln2, w.fc_w, N, C, 4 * C);  // dC = d(ln2)
  be_.layernorm_backward(dres_, g.ln2_w, g.ln2_b, dC_, L.res2, w.ln2_w, L.ln2_mean, L.ln2_rstd, N,
                         C);
  if (grad_ready_) grad_ready_(mlp_grads(l));
}

// Block l's c_attn and ln_1 backward from dqkv_ (N, 3C): dres (N, C) += d(x).
void GPT::attention_input_backward(int l, int64_t N) {
  const int C = cfg_.n_embd;
  const LayerActivations& L = layers_[l];
  const LayerParams& w = pv_.h[l];
  LayerParams& g = gv_.h[l];
  be_.matmul_backward(dC_, g.qkv_w, g.qkv_b, dqkv_, L.ln1, w.qkv_w, N, C, 3 * C);  // d(ln1)
  be_.layernorm_backward(dres_, g.ln1_w, g.ln1_b, dC_, L.x, w.ln1_w, L.ln1_mean, L.ln1_rstd, N, C);
}

void GPT::backward(float dloss) {
  check(have_targets_, "backward() needs a forward() with targets first");
  check(for_backward_, "backward() after a forward(for_backward = false), which kept no state");
  const int B = lastB_, T = lastT_, C = cfg_.n_embd, V = cfg_.vocab_size;
  const int64_t N = (int64_t)B * T;
  check_precision();
  if (fused_) {  // dlogits (N, V) is logits_, written by the fused loss with folded_dloss_
    if (dloss != folded_dloss_) be_.scale(dlogits_, dloss / folded_dloss_, N * V);
  } else
    be_.softmax_crossentropy_backward(dlogits_.f32(), probs_, targets_, dloss, N, V);  // (N, V)
  // classifier: logits = lnf @ wte^T; dC (N, C) = d(lnf), dwte += dlogits^T @ lnf
  be_.matmul_backward(dC_, gv_.wte, nullptr, dlogits_, lnf_, pv_.wte, N, C, V,
                      /*w_transposed=*/true);
  float* xL = cfg_.n_layer ? layers_.back().out : x0_;
  be_.zero(dres_, sizeof(float) * N * C);
  be_.layernorm_backward(dres_, gv_.lnf_w, gv_.lnf_b, dC_, xL, pv_.lnf_w, lnf_mean_, lnf_rstd_, N,
                         C);  // dres (N, C) = d(xL)
  if (grad_ready_) grad_ready_(lnf_grads());
  for (int l = cfg_.n_layer - 1; l >= 0; --l) {
    recompute_for_backward(l, B, T);
    if (fused_)  // (both call the hook for the block's MLP half)
      block_backward_fused(l, B, T);
    else
      block_backward_unfused(l, B, T);
    if (grad_ready_) grad_ready_(attention_grads(l));
  }
  be_.embedding_backward(gv_.wte, gv_.wpe, dres_, inputs_, B, T, C);  // dwte, dwpe +=
  if (grad_ready_) grad_ready_(embedding_grads());
}

GPT::GradGroup GPT::mlp_grads(int l) const {
  const LayerParams& g = gv_.h[l];
  return {g.ln2_w, g.fcproj_b + cfg_.n_embd};
}

GPT::GradGroup GPT::attention_grads(int l) const {
  const LayerParams& g = gv_.h[l];
  return {g.ln1_w, g.attproj_b + cfg_.n_embd};
}

GPT::GradGroup GPT::lnf_grads() const { return {gv_.lnf_w, gv_.lnf_b + cfg_.n_embd}; }

GPT::GradGroup GPT::embedding_grads() const {
  return {gv_.wte, gv_.wpe + (int64_t)cfg_.block_size * cfg_.n_embd};
}

std::vector<GPT::GradGroup> GPT::grad_groups() const {
  std::vector<GradGroup> g{lnf_grads()};
  for (int l = cfg_.n_layer - 1; l >= 0; --l) {
    g.push_back(mlp_grads(l));
    g.push_back(attention_grads(l));
  }
  g.push_back(embedding_grads());
  return g;
}

}  // namespace gt
