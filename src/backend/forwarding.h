// backend/forwarding.h: a Backend that forwards every call to another one, each op through one
// hook (around()), so a wrapper overrides one function instead of every op: the profiling
// backend (profiling.cpp) times ops there; a test double overrides what it changes
// (tests/backend: a backend that drops set_precision). The op list is GT_BACKEND_OPS; this
// file holds the forwarders, one per op of backend.h (signatures differ, so they cannot come
// from the list).
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include "backend/backend.h"

namespace gt {

/// A call of one op, not owning it (a function reference: no allocation per op).
class OpCall {
 public:
  template <typename F>
  explicit OpCall(F& f) : obj_(&f), call_([](void* o) { (*static_cast<F*>(o))(); }) {}
  void operator()() const { call_(obj_); }

 private:
  void* obj_;
  void (*call_)(void*);
};

/// An op's shape, for a profile by shape (GT_PROFILE=shapes). product: a linear layer's rows
/// (tokens) x inputs -> outputs (a = N, b = C, c = OC); attention: batch, sequence length,
/// channels and heads (a = B, b = T, c = C, d = NH); none for the other ops.
struct OpShape {
  enum class Kind { none, product, attention } kind = Kind::none;
  int64_t a = 0, b = 0, c = 0, d = 0;
};

/// Forwards every call to `inner`; each op (and adamw_step, matmul_gelu_forward_fused) runs
/// through around(). Graph
/// capture (Backend::begin_graph) is not forwarded: a wrapper sees each op as it runs (the
/// profiler synchronizes around it), which a captured step would not.
class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : in_(std::move(inner)) {}

  /// Runs `call`, the op named `op` (op_name(), "adamw_step" or "matmul_gelu_forward_fused"),
  /// of `flops` floating-point operations (2*M*N*K per product, attention's full T x T squares,
  /// else 0) and shape `shape` (products and attention; else Kind::none). Default: runs it.
  virtual void around(std::string_view op, double flops, const OpShape& shape, OpCall call) {
    (void)op, (void)flops, (void)shape;
    call();
  }
  /// The wrapped backend.
  Backend& inner() { return *in_; }
  const Backend& inner() const { return *in_; }

  // ---- memory and state: forwarded as they are ------------------------------------------
  std::string name() const override { return in_->name(); }
  Device device() const override { return in_->device(); }
  bool host_readable() const override { return in_->host_readable(); }
  void* allocate(size_t bytes) override { return in_->allocate(bytes); }
  void deallocate(void* p) override { in_->deallocate(p); }
  void zero(void* p, size_t bytes) override { in_->zero(p, bytes); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    in_->copy_to_device(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    in_->copy_to_host(dst, src, bytes);
  }
  void synchronize() override { in_->synchronize(); }
  void bind_thread() override { in_->bind_thread(); }
  uint64_t mark_queued() override { return in_->mark_queued(); }
  void wait_for_mark(uint64_t m) override { in_->wait_for_mark(m); }
  void* allocate_host(size_t bytes) override { return in_->allocate_host(bytes); }
  void deallocate_host(void* p) override { in_->deallocate_host(p); }
  void copy_to_device_async(void* dst, const void* src, size_t bytes) override {
    in_->copy_to_device_async(dst, src, bytes);
  }
  void copy_to_host_async(void* dst, const void* src, size_t bytes) override {
    in_->copy_to_host_async(dst, src, bytes);
  }
  void host_tokens(const int32_t* dev, const int32_t* host, int64_t n) override {
    in_->host_tokens(dev, host, n);
  }
  void end_step(double step_s) override { in_->end_step(step_s); }
  std::optional<ThreadPolicy> thread_policy() const override { return in_->thread_policy(); }
  ThreadCount thread_count() const override { return in_->thread_count(); }
  std::optional<ProductPath> product_path() const override { return in_->product_path(); }
  bool supports(Op op, Precision p) const override { return in_->supports(op, p); }
  size_t workspace_bytes(const WorkspaceQuery& q) const override { return in_->workspace_bytes(q); }
  void set_precision(Precision p) override { in_->set_precision(p); }
  Precision precision() const override { return in_->precision(); }
  void weights_updated() override { in_->weights_updated(); }
  void set_stochastic_rounding(bool on, uint64_t seed) override {
    in_->set_stochastic_rounding(on, seed);
  }
  bool bf16_qkv(int C, int NH) const override { return in_->bf16_qkv(C, NH); }
  bool saves_gelu_input() const override { return in_->saves_gelu_input(); }

  // ---- the ops, each through around() -----------------------------------------------------
  const AdamStepResult* adamw_step(const AdamStep& s) override {
    const AdamStepResult* r = nullptr;
    run("adamw_step", 0, OpShape{}, [&] { r = in_->adamw_step(s); });
    return r;
  }
  void embedding_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                         int T, int C) override {
    run(Op::embedding_forward, 0, [&] { in_->embedding_forward(out, inp, wte, wpe, B, T, C); });
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                          int T, int C) override {
    run(Op::embedding_backward, 0,
        [&] { in_->embedding_backward(dwte, dwpe, dout, inp, B, T, C); });
  }
  void layernorm_forward(DevPtr out, float* mean, float* rstd, const float* inp, const float* w,
                         const float* b, int64_t N, int C) override {
    run(Op::layernorm_forward, 0,
        [&] { in_->layernorm_forward(out, mean, rstd, inp, w, b, N, C); });
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                          const float* w, const float* mean, const float* rstd, int64_t N,
                          int C) override {
    run(Op::layernorm_backward, 0,
        [&] { in_->layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C); });
  }
  void matmul_forward(DevPtr out, ConstDevPtr inp, const float* w, const float* bias, int64_t N,
                      int C, int OC, bool wt) override {
    run(Op::matmul_forward, 2.0 * N * C * OC, product_shape(N, C, OC),
        [&] { in_->matmul_forward(out, inp, w, bias, N, C, OC, wt); });
  }
  void gelu_forward_fused(DevPtr out, DevPtr dgelu, const float* inp, int64_t N) override {
    run(Op::gelu_forward_fused, 0, [&] { in_->gelu_forward_fused(out, dgelu, inp, N); });
  }
  void matmul_gelu_forward_fused(DevPtr out, DevPtr dgelu, float* pre, ConstDevPtr inp,
                                 const float* w, const float* bias, int64_t N, int C,
                                 int OC) override {
    run("matmul_gelu_forward_fused", 2.0 * N * C * OC, product_shape(N, C, OC),
        [&] { in_->matmul_gelu_forward_fused(out, dgelu, pre, inp, w, bias, N, C, OC); });
  }
  using Backend::matmul_backward_gelu;  // the non-virtual short forms stay visible
  using Backend::matmul_gelu_forward;
  void matmul_backward_gelu(DevPtr dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                            const float* w, ConstDevPtr gelu, GeluSaved saved, int64_t N, int C,
                            int OC) override {
    run(Op::matmul_backward_gelu, 4.0 * N * C * OC, product_shape(N, C, OC),
        [&] { in_->matmul_backward_gelu(dinp, dw, dbias, dout, inp, w, gelu, saved, N, C, OC); });
  }
  void matmul_gelu_forward(DevPtr out, DevPtr pre, ConstDevPtr inp, const float* w,
                           const float* bias, int64_t N, int C, int OC) override {
    run(Op::matmul_gelu_forward, 2.0 * N * C * OC, product_shape(N, C, OC),
        [&] { in_->matmul_gelu_forward(out, pre, inp, w, bias, N, C, OC); });
  }
  void matmul_backward(float* dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                       const float* w, int64_t N, int C, int OC, bool wt) override {
    run(Op::matmul_backward, (dinp ? 4.0 : 2.0) * N * C * OC, product_shape(N, C, OC),
        [&] { in_->matmul_backward(dinp, dw, dbias, dout, inp, w, N, C, OC, wt); });
  }
  /// Attention's FLOPs: the products as computed (full T x T squares), n of them.
  static double attn_flops(int B, int T, int C, int n) { return n * 2.0 * B * T * (double)T * C; }
  void attention_forward(DevPtr out, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    run(Op::attention_forward, attn_flops(B, T, C, 2), attention_shape(B, T, C, NH),
        [&] { in_->attention_forward(out, att, qkv, B, T, C, NH); });
  }
  void attention_backward(DevPtr dqkv, const float* dout, const float* qkv, const float* att, int B,
                          int T, int C, int NH) override {
    run(Op::attention_backward, attn_flops(B, T, C, 4), attention_shape(B, T, C, NH),
        [&] { in_->attention_backward(dqkv, dout, qkv, att, B, T, C, NH); });
  }
  void gelu_forward(DevPtr out, const float* inp, int64_t N) override {
    run(Op::gelu_forward, 0, [&] { in_->gelu_forward(out, inp, N); });
  }
  void gelu_backward(DevPtr dinp, const float* inp, const float* dout, int64_t N) override {
    run(Op::gelu_backward, 0, [&] { in_->gelu_backward(dinp, inp, dout, N); });
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t N) override {
    run(Op::residual_forward, 0, [&] { in_->residual_forward(out, a, b, N); });
  }
  void softmax_crossentropy_forward(float* probs, float* losses, const float* logits,
                                    const int32_t* targets, int64_t N, int V) override {
    run(Op::softmax_crossentropy_forward, 0,
        [&] { in_->softmax_crossentropy_forward(probs, losses, logits, targets, N, V); });
  }
  void softmax_crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets,
                                     float dloss, int64_t N, int V) override {
    run(Op::softmax_crossentropy_backward, 0,
        [&] { in_->softmax_crossentropy_backward(dlogits, probs, targets, dloss, N, V); });
  }
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                    float beta2, float eps, float wd, int64_t t) override {
    run(Op::adamw_update, 0,
        [&] { in_->adamw_update(p, g, m, v, n, lr, beta1, beta2, eps, wd, t); });
  }
  double sum_squares(const float* g, int64_t n) override {
    double r = 0;
    run(Op::sum_squares, 0, [&] { r = in_->sum_squares(g, n); });
    return r;
  }
  void scale(DevPtr g, float s, int64_t n) override {
    run(Op::scale, 0, [&] { in_->scale(g, s, n); });
  }
  void residual_layernorm_forward(float* res, DevPtr out, float* mean, float* rstd, const float* a,
                                  const float* b, const float* w, const float* bias, int64_t N,
                                  int C) override {
    run(Op::residual_layernorm_forward, 0,
        [&] { in_->residual_layernorm_forward(res, out, mean, rstd, a, b, w, bias, N, C); });
  }
  void attention_forward_fused(DevPtr out, float* lse, ConstDevPtr qkv, int B, int T, int C,
                               int NH) override {
    run(Op::attention_forward_fused, attn_flops(B, T, C, 2), attention_shape(B, T, C, NH),
        [&] { in_->attention_forward_fused(out, lse, qkv, B, T, C, NH); });
  }
  void attention_backward_fused(DevPtr dqkv, const float* dout, ConstDevPtr qkv, ConstDevPtr out,
                                const float* lse, int B, int T, int C, int NH) override {
    // the fused backward recomputes the scores: one more product
    run(Op::attention_backward_fused, attn_flops(B, T, C, 5), attention_shape(B, T, C, NH),
        [&] { in_->attention_backward_fused(dqkv, dout, qkv, out, lse, B, T, C, NH); });
  }
  void softmax_crossentropy_fused(DevPtr logits, float* losses, const int32_t* targets, float dloss,
                                  int64_t N, int V) override {
    run(Op::softmax_crossentropy_fused, 0,
        [&] { in_->softmax_crossentropy_fused(logits, losses, targets, dloss, N, V); });
  }
  void adamw_fused(float* const* p, const float* const* g, float* const* m, float* const* v,
                   const int64_t* n, const float* wd, int count, float grad_mult, float lr,
                   float beta1, float beta2, float eps, int64_t t) override {
    run(Op::adamw_fused, 0,
        [&] { in_->adamw_fused(p, g, m, v, n, wd, count, grad_mult, lr, beta1, beta2, eps, t); });
  }

 private:
  static OpShape product_shape(int64_t N, int64_t C, int64_t OC) {
    return {OpShape::Kind::product, N, C, OC, 0};
  }
  static OpShape attention_shape(int64_t B, int64_t T, int64_t C, int64_t NH) {
    return {OpShape::Kind::attention, B, T, C, NH};
  }
  template <typename F>
  void run(std::string_view op, double flops, const OpShape& shape, F f) {
    around(op, flops, shape, OpCall(f));
  }
  template <typename F>
  void run(Op op, double flops, const OpShape& shape, F f) {
    run(op_name(op), flops, shape, f);
  }
  template <typename F>
  void run(Op op, double flops, F f) {
    run(op_name(op), flops, OpShape{}, f);
  }
  std::unique_ptr<Backend> in_;
};

}  // namespace gt
