// backend/cuda/cuda_backend_impl.h: the CUDA backend's op table, precision policy and
// bookkeeping, written once over a runtime RT that supplies memory, copies, the matrix
// product and the kernels:
//   - CudaRuntime (cuda_backend.cpp): device memory, one stream, cuBLASLt, DeviceKernels;
//   - HostRuntime (cuda_emulation.cpp): host memory, a plain product, HostKernels: the same
//     backend code on the CPU (train.device = cuda-emu), so that every line of it above the
//     runtime is tested on every machine by the op test and the training tests.
// RT provides: Kernels (kernels.h), kDevice, kWorkspaceBytes, static name(index),
// RT(index), stream(), bind_thread(), malloc/free/memset0/h2d/d2h/sync/sync_noexcept, product(),
// fp8_capable(), describe(), and cuDNN's attention: use_cudnn_attention() (throws where there
// is none), sdpa_forward() and sdpa_backward() (cudnn_attention.h's operands).
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cudnn_attention.h"
#include "backend/cuda/host_plan.h"
#include "backend/cuda/kernel_configs.h"
#include "backend/cuda/kernel_math.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace gt::cuda_impl {

/// Elements per block of the multi-tensor AdamW.
constexpr int64_t kAdamChunk = int64_t(1) << 16;

using cuda_plan::LtType;
/// A product operand: device pointer and element type.
struct LtOperand {
  const void* p;
  LtType type;
  const float* scale = nullptr;  ///< fp8: device pointer to the dequantization factor
};

/// A device buffer of runtime RT that grows (never shrinks) to the largest size asked of it.
template <class RT>
class DevBuffer {
 public:
  explicit DevBuffer(RT* rt) : rt_(rt) {}
  DevBuffer(const DevBuffer&) = delete;
  DevBuffer& operator=(const DevBuffer&) = delete;
  ~DevBuffer() {
    if (p_) rt_->free(p_);
  }
  /// At least `bytes` of device memory (the old contents are lost when it grows).
  void* get(size_t bytes) {
    if (bytes > bytes_) {
      if (p_) rt_->free(p_);
      p_ = nullptr;
      bytes_ = 0;
      p_ = rt_->malloc(bytes);
      bytes_ = bytes;
    }
    return p_;
  }
  template <typename T>
  T* as(int64_t n) {
    return static_cast<T*>(get(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T)));
  }

 private:
  RT* rt_;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

template <class RT>
class CudaBackendT final : public Backend {
  using K = typename RT::Kernels;

 public:
  /// opt.attention = cudnn: cuDNN's fused attention for the fused attention ops, loaded here
  /// (gt::Error when the runtime has none or libcudnn.so.9 cannot be loaded).
  CudaBackendT(int index, const BackendOptions& opt)
      : rt_(index), index_(index), cudnn_(opt.attention == AttentionImpl::cudnn) {
    if (cudnn_) rt_.use_cudnn_attention();
  }
  ~CudaBackendT() override {
    rt_.sync_noexcept();
    for (void* p : staging_) rt_.free_host(p);
    if (result_) rt_.free_host(result_);
  }

  std::string name() const override { return RT::name(index_); }

  // ---- memory: the runtime's (device memory on the GPU) --------------------------------
  Device device() const override { return RT::kDevice; }
  /// false for both runtimes: the emulation's host memory is declared device memory, so the
  /// staged paths a GPU needs (checkpoints, logits) run on the CPU too.
  bool host_readable() const override { return false; }
  void* allocate(size_t bytes) override { return rt_.malloc(bytes); }
  void deallocate(void* p) override {
    if (p) rt_.free(p);
  }
  void zero(void* p, size_t bytes) override { rt_.memset0(p, bytes); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    rt_.h2d(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { rt_.d2h(dst, src, bytes); }
  void synchronize() override {
    rt_.sync();
    staged_since_sync_ = 0;
  }
  // ---- the step as one CUDA graph -----------------------------------------------------
  bool supports_graphs() const override { return true; }
  void begin_graph() override {
    check(!capturing_, fmt::format("{}: begin_graph() while a capture is open", name()));
    rt_.begin_capture();
    capturing_ = true;
    made_in_capture_.clear();
  }
  std::string launch_graph() override {
    check(capturing_, fmt::format("{}: launch_graph() without begin_graph()", name()));
    capturing_ = false;
    try {
      if (rt_.end_capture_and_launch())
        ++graph_stats_.updates;
      else
        ++graph_stats_.instantiations;
      ++graph_stats_.launches;
      return {};
    } catch (const Error& e) {
      forget_capture();
      return e.what();
    }
  }
  void abandon_graph() noexcept override {
    if (!capturing_) return;
    capturing_ = false;
    rt_.abandon_capture();
    forget_capture();
  }
  GraphStats graph_stats() const override { return graph_stats_; }

  uint64_t mark_queued() override { return rt_.mark(); }
  void wait_for_mark(uint64_t m) override { rt_.wait_mark(m); }
  void* allocate_host(size_t bytes) override { return rt_.malloc_host(bytes); }
  void deallocate_host(void* p) override {
    if (p) rt_.free_host(p);
  }
  void copy_to_device_async(void* dst, const void* src, size_t bytes) override {
    rt_.h2d_async(dst, src, bytes);
  }
  void copy_to_host_async(void* dst, const void* src, size_t bytes) override {
    rt_.d2h_async(dst, src, bytes);
  }
  /// Keeps a copy: the embedding backward's index and the targets' check read it.
  void host_tokens(const int32_t* dev, const int32_t* host, int64_t n) override {
    host_tokens_[dev].assign(host, host + n);
  }
  void bind_thread() override { rt_.bind_thread(); }

  // ---- capabilities -------------------------------------------------------------------
  bool supports(Op, Precision p) const override { return p != Precision::fp8 || rt_.fp8_capable(); }
  /// cuBLASLt's workspace; for 16-bit precisions the weight copies and the rounded operands
  /// (N*max(hidden,V), and N*hidden for the backward's input) and the bias gradient epilogue's
  /// output (max(hidden,V,3C) floats); the product buffer of the
  /// fused GELU backward and GELU epilogue fallback (N*max(hidden,V) floats); partial sums,
  /// attention row sums (B*NH*T) and the embedding backward's token index (3N ints).
  size_t workspace_bytes(const WorkspaceQuery& q) const override {
    const int64_t wide = std::max<int64_t>({q.hidden, q.V, q.C});
    size_t bytes =
        RT::kWorkspaceBytes + static_cast<size_t>(q.N * wide) * 4 +
        static_cast<size_t>(K::layernorm_partial_floats(q.N, static_cast<int>(wide))) * 4 +
        static_cast<size_t>(q.N * q.NH) * 4 + static_cast<size_t>(3 * q.N + 1) * 4;
    if (q.precision != Precision::fp32) {
      const bool act16 = q.bf16_activations && q.precision == Precision::bf16;
      // bf16 logits (fused, bf16 activations): the classifier's gradient needs no rounded copy
      const int64_t rounded = act16 && q.fused ? std::max<int64_t>(q.hidden, 3 * q.C) : wide;
      bytes +=
          static_cast<size_t>(q.weight_elems + q.N * rounded + (act16 ? 0 : q.N * q.hidden)) * 2;
      bytes += static_cast<size_t>(std::max<int64_t>(wide, 3 * q.C)) * 4;  // bgrad_
    }
    // cuDNN attention's 16-bit copies of its operands per token: dout (C) always; qkv (3C)
    // unless the model hands it over in bf16 (bf16_qkv), out (C) and dqkv (3C) unless bf16
    // activations make them bf16 tensors; and cuDNN's workspace as its deterministic backward
    // on Hopper takes it (dP in 16 bits, the scores' rows and columns rounded up to 64 and 128:
    // the frontend's node/scaled_dot_product_flash_attention.h; the plan says the exact size
    // once built)
    if (cudnn_ && q.T > 0) {
      const bool act16 = q.bf16_activations && q.precision == Precision::bf16;
      const bool qkv16 = act16 && q.fused && bf16_qkv(q.C, q.NH);
      const int64_t per_token = q.C + (qkv16 ? 0 : 3 * q.C) + (act16 ? 0 : 4 * q.C);
      const int64_t t64 = (q.T + 63) / 64 * 64, t128 = (int64_t(q.T) + 127) / 128 * 128;
      bytes += static_cast<size_t>(q.N * per_token) * 2 +
               static_cast<size_t>(q.N / q.T * q.NH * t64 * t128) * 2;
    }
    return bytes;
  }

  // ---- embedding ----------------------------------------------------------------------
  void embedding_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                         int T, int C) override {
    K::embedding_forward(rt_.stream(), out, inp, wte, wpe, B, T, C);
  }
  /// A counting sort of the token ids by token on the host, so that each row of dwte is summed
  /// by one thread in the order of positions: no atomics on floats. The ids are the host copy
  /// host_tokens() registered (no synchronization), or else come back from the device; the
  /// index goes up through pinned memory, asynchronously.
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                          int T, int C) override {
    const int64_t n = int64_t(B) * T;
    const std::vector<int32_t>& tokens = tokens_of(inp, n);
    for (int64_t i = 0; i < n; ++i)
      check(tokens[i] >= 0, fmt::format("embedding_backward: token id {} is negative", tokens[i]));
    std::vector<int32_t>& idx = index_host_;
    const int32_t U = cuda_plan::token_index(tokens, idx);
    // sized for the most distinct ids (n), so that no step's index grows it (a graph's
    // capture allocates nothing)
    int32_t* d = token_index_.template as<int32_t>(3 * n + 1);
    check(idx.size() <= size_t(3 * n + 1), "embedding_backward: the token index outgrew 3n+1");
    idx.resize(3 * n + 1);  // one upload size every step: its pinned buffer never grows either
    upload_staged(d, idx.data(), idx.size() * sizeof(int32_t));
    K::embedding_backward(rt_.stream(), dwte, dwpe, dout, d, d + U, d + 2 * U + 1, U, B, T, C);
  }

  // ---- LayerNorm ----------------------------------------------------------------------
  void layernorm_forward(DevPtr out, float* mean, float* rstd, const float* inp, const float* w,
                         const float* b, int64_t N, int C) override {
    K::layernorm_forward(rt_.stream(), f32_or_null(out), as16(out), mean, rstd, inp, w, b, N, C);
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                          const float* w, const float* mean, const float* rstd, int64_t N,
                          int C) override {
    K::layernorm_backward(rt_.stream(), dinp, dw, db, dout, inp, w, mean, rstd, N, C,
                          partial_.template as<float>(K::layernorm_partial_floats(N, C)));
  }
  void residual_layernorm_forward(float* res, DevPtr out, float* mean, float* rstd, const float* a,
                                  const float* b, const float* w, const float* bias, int64_t N,
                                  int C) override {
    K::residual_layernorm_forward(rt_.stream(), res, f32_or_null(out), as16(out), mean, rstd, a, b,
                                  w, bias, N, C);
  }

  // ---- matrix products ----------------------------------------------------------------
  /// A bf16 out is cuBLASLt's bf16 D (a bias then in bf16 too: the output's type).
  void matmul_forward(DevPtr out, ConstDevPtr inp, const float* w, const float* bias, int64_t N,
                      int C, int OC, bool w_transposed) override {
    const uint16_t* o16 = as16(out);  // bf16 only under bf16, so never the fp8 form's
    if (!o16 && fp8_forward(out.f32(), inp, w, N, C, OC, w_transposed)) {
      if (bias) K::bias_add(rt_.stream(), out.f32(), bias, N, OC);
      return;
    }
    const auto g = cuda_plan::forward(N, C, OC, w_transposed);
    const LtOperand W = weight_operand(w, int64_t(C) * OC), X = operand(act_a_, inp, N * C);
    const void* b = bias && o16 ? weight_operand(bias, OC).p : bias;
    product(g, pick(g.a, W, X, {}), pick(g.b, W, X, {}), out.data, o16 ? LtType::bf16 : LtType::f32,
            b, {});
  }
  /// The GELU is cuBLASLt's epilogue (tanh form) under 16-bit precisions; under fp32 the own
  /// bias+GELU kernel follows a plain product, so fp32 stays within fp32 rounding of the
  /// reference's GELU.
  /// With pre (training): under 16-bit precisions cuBLASLt's GELU_AUX_BIAS epilogue writes
  /// out and the pre-activation in one product (pre of out's type), as llm.c's forward; else
  /// (fp32, fp8, or no algorithm) the own bias+GELU kernel writes both from an f32 product.
  void matmul_gelu_forward(DevPtr out, DevPtr pre, ConstDevPtr inp, const float* w,
                           const float* bias, int64_t N, int C, int OC) override {
    uint16_t* o16 = as16(out);
    float* prod = prod_.template as<float>(N * OC);
    auto own_epilogue = [&] {
      K::bias_gelu(rt_.stream(), f32_or_null(out), o16, f32_or_null(pre), as16(pre), prod, bias, N,
                   OC);
    };
    if (fp8_forward(prod, inp, w, N, C, OC, false)) return own_epilogue();
    const auto g = cuda_plan::forward(N, C, OC, false);
    const LtOperand W = weight_operand(w, int64_t(C) * OC), X = operand(act_a_, inp, N * C);
    if (prec_ != Precision::fp32 && (!pre || pre.dtype == out.dtype)) {
      // the bias has the output's type (cuBLASLt: CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE)
      const void* b = bias && o16 ? weight_operand(bias, OC).p : bias;
      const cuda_plan::LtEpilogue ep =
          pre ? cuda_plan::LtEpilogue{cuda_plan::LtEpi::gelu_aux, pre.data, OC}
              : cuda_plan::LtEpilogue{cuda_plan::LtEpi::gelu};
      if (product(g, W, X, out.data, o16 ? LtType::bf16 : LtType::f32, b, ep, /*may_fail=*/true))
        return;
    }
    product(g, W, X, prod, LtType::f32, nullptr, {});
    own_epilogue();
  }
  void matmul_backward(float* dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                       const float* w, int64_t N, int C, int OC, bool w_transposed) override {
    backward_products(dinp, dw, dbias, dout, inp, w, {}, N, C, OC, w_transposed);
  }
  void matmul_backward_gelu(DevPtr dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                            const float* w, ConstDevPtr gelu, GeluSaved saved, int64_t N, int C,
                            int OC) override {
    backward_products(dinp, dw, dbias, dout, inp, w, {gelu, saved}, N, C, OC, false);
  }
  /// The MLP saves the GELU's input: the products apply GELU and gelu' in their epilogues
  /// (cuBLASLt's GELU_AUX_BIAS and DGELU), as llm.c's forward and backward do on Hopper.
  bool saves_gelu_input() const override { return true; }

  // ---- attention ----------------------------------------------------------------------
  void attention_forward(DevPtr out, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    check_heads(C, NH);
    K::attention_forward(rt_.stream(), f32_or_null(out), as16(out), nullptr, att, qkv, nullptr, B,
                         T, C, NH, 0);
  }
  void attention_backward(DevPtr dqkv, const float* dout, const float* qkv, const float* att, int B,
                          int T, int C, int NH) override {
    check_heads(C, NH);
    K::attention_backward(rt_.stream(), f32_or_null(dqkv), as16(dqkv), dout, qkv, nullptr, att,
                          nullptr, nullptr, nullptr, delta_.template as<float>(int64_t(B) * NH * T),
                          B, T, C, NH, 0);
  }
  /// A bf16 qkv (bf16_qkv()) is read in place by the flash kernels and by cuDNN; where neither
  /// takes it (another head size or output type) it is widened into f32 scratch first.
  void attention_forward_fused(DevPtr out, float* lse, ConstDevPtr qkv, int B, int T, int C,
                               int NH) override {
    check_heads(C, NH);
    if (cudnn_) return cudnn_forward(out, lse, qkv, B, T, C, NH);
    uint16_t* o16 = as16(out);
    const AttnQkv q = attention_qkv(qkv, int64_t(B) * T, C, NH, o16 != nullptr);
    K::attention_forward(rt_.stream(), f32_or_null(out), o16, lse, nullptr, q.f32, q.bf16, B, T, C,
                         NH, flash());
  }
  void attention_backward_fused(DevPtr dqkv, const float* dout, ConstDevPtr qkv, ConstDevPtr out,
                                const float* lse, int B, int T, int C, int NH) override {
    check_heads(C, NH);
    if (cudnn_) return cudnn_backward(dqkv, dout, qkv, out, lse, B, T, C, NH);
    const uint16_t* o16 = as16(out);
    uint16_t* d16 = as16(dqkv);
    const AttnQkv q = attention_qkv(qkv, int64_t(B) * T, C, NH, d16 != nullptr);
    K::attention_backward(rt_.stream(), f32_or_null(dqkv), d16, dout, q.f32, q.bf16, nullptr, lse,
                          o16 ? nullptr : out.f32(), o16,
                          delta_.template as<float>(int64_t(B) * NH * T), B, T, C, NH, flash());
  }
  /// For the head sizes the flash kernels take (the arenas' 64-byte alignment is theirs).
  bool bf16_qkv(int C, int NH) const override {
    return K::flash_reads_qkv16(C, NH, nullptr, /*flash (bf16)=*/1);
  }

  // ---- element-wise -------------------------------------------------------------------
  void gelu_forward(DevPtr out, const float* inp, int64_t N) override {
    K::gelu_forward(rt_.stream(), f32_or_null(out), as16(out), inp, N);
  }
  void gelu_backward(DevPtr dinp, const float* inp, const float* dout, int64_t N) override {
    K::gelu_backward(rt_.stream(), f32_or_null(dinp), as16(dinp), inp, dout, N);
  }
  void gelu_forward_fused(DevPtr out, DevPtr dgelu, const float* inp, int64_t N) override {
    K::gelu_forward_fused(rt_.stream(), f32_or_null(out), as16(out), f32_or_null(dgelu),
                          as16(dgelu), inp, N);
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t N) override {
    K::residual(rt_.stream(), out, a, b, N);
  }

  // ---- loss ---------------------------------------------------------------------------
  void softmax_crossentropy_forward(float* probs, float* losses, const float* logits,
                                    const int32_t* targets, int64_t N, int V) override {
    check_targets(targets, N, V);
    K::softmax_ce_forward(rt_.stream(), probs, losses, logits, targets, N, V);
  }
  void softmax_crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets,
                                     float dloss, int64_t N, int V) override {
    K::softmax_ce_backward(rt_.stream(), dlogits, probs, targets, dloss, N, V);
  }
  void softmax_crossentropy_fused(DevPtr logits, float* losses, const int32_t* targets, float dloss,
                                  int64_t N, int V) override {
    check_targets(targets, N, V);
    K::softmax_ce_fused(rt_.stream(), f32_or_null(logits), as16(logits), losses, targets, dloss, N,
                        V);
  }

  // ---- optimizer ----------------------------------------------------------------------
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, int64_t t) override {
    const auto [bc1, bc2_sqrt] = bias_corrections(beta1, beta2, t);
    K::adamw(rt_.stream(), p, g, m, v, n, 1.0f, lr, beta1, beta2, eps, 1.0f - lr * weight_decay,
             bc1, bc2_sqrt);
  }
  /// One launch over every tensor: a table of (tensor, range) chunks of kAdamChunk elements,
  /// uploaded when it changes (the tensors of a model do not: once).
  void adamw_fused(float* const* p, const float* const* g, float* const* m, float* const* v,
                   const int64_t* n, const float* wd, int count, float grad_mult, float lr,
                   float beta1, float beta2, float eps, int64_t t) override {
    const cuda_kernels::AdamChunk* d = chunk_table(p, g, m, v, n, wd, count);
    if (!d) return;
    const auto [bc1, bc2_sqrt] = bias_corrections(beta1, beta2, t);
    K::adamw_multi(rt_.stream(), d, static_cast<int64_t>(chunks_host_.size()), grad_mult, nullptr,
                   1.0, 0.0, lr, beta1, beta2, eps, bc1, bc2_sqrt, nullptr);
  }
  /// The whole update on the device: the norm (sum_squares' kernels), the multiplier and the
  /// skip decided by every AdamW block from it, inf/NaN in what AdamW wrote raised as a flag;
  /// the norm and the flag copied back asynchronously into pinned memory.
  const AdamStepResult* adamw_step(const AdamStep& s) override {
    if (!result_) result_ = static_cast<AdamStepResult*>(allocate_host(sizeof(AdamStepResult)));
    double* d = squares_.template as<double>(1 + cuda_kernels::configs::kNormBlocks);  // out, parts
    int* flag = flag_.template as<int>(1);
    K::sum_squares(rt_.stream(), d, s.grads, s.grads_n, d + 1);
    rt_.memset0(flag, sizeof(int));
    if (const cuda_kernels::AdamChunk* c = chunk_table(s.p, s.g, s.m, s.v, s.n, s.wd, s.count)) {
      const auto [bc1, bc2_sqrt] = bias_corrections(s.beta1, s.beta2, s.t);
      K::adamw_multi(rt_.stream(), c, static_cast<int64_t>(chunks_host_.size()), 1.0f, d,
                     s.loss_scale, s.clip, s.lr, s.beta1, s.beta2, s.eps, bc1, bc2_sqrt, flag);
    }
    copy_to_host_async(&result_->norm_sq, d, sizeof(double));
    copy_to_host_async(&result_->nonfinite_state, flag, sizeof(int32_t));
    return result_;
  }
  /// In double on the device over a fixed grid (the same sum on every GPU); one double read.
  double sum_squares(const float* g, int64_t n) override {
    double* d = squares_.template as<double>(1 + cuda_kernels::configs::kNormBlocks);  // out, parts
    K::sum_squares(rt_.stream(), d, g, n, d + 1);
    double s = 0.0;
    copy_to_host(&s, d, sizeof(double));
    return s;
  }
  void scale(DevPtr g, float s, int64_t n) override {
    K::scale(rt_.stream(), f32_or_null(g), as16(g), s, n);
  }

  // ---- precision policy ---------------------------------------------------------------
  void set_precision(Precision p) override {
    if (p == Precision::fp8 && !rt_.fp8_capable())
      throw Error(fmt::format(
          "train.precision = 'fp8': {} ({}) has no fp8 matrix products; they need compute "
          "capability 8.9 or 9.0 (Ada, Hopper); use bf16",
          name(), rt_.describe()));
    prec_ = p;
    weights_.clear();
    fp8_state_.clear();
    fp8_weights_.clear();
    fp8_scratch_.clear();
  }
  Precision precision() const override { return prec_; }
  void set_stochastic_rounding(bool on, uint64_t seed) override {
    if (on != sr_ || seed != sr_seed_) ++generation_;
    sr_ = on;
    sr_seed_ = seed;
  }
  void weights_updated() override { ++generation_; }

 private:
  /// After a capture that did not run: what the host recorded as done during it is undone
  /// (the 16-bit weight copies, the AdamW chunk table, fp8 states made then), so that the
  /// same ops queued again without a graph do that work.
  void forget_capture() {
    ++generation_;
    chunks_at_ = nullptr;
    for (const auto& k : made_in_capture_) fp8_state_.erase(k);
    made_in_capture_.clear();
  }
  static std::pair<float, float> bias_corrections(float beta1, float beta2, int64_t t) {
    return {static_cast<float>(1.0 - std::pow(double(beta1), double(t))),
            static_cast<float>(std::sqrt(1.0 - std::pow(double(beta2), double(t))))};
  }
  /// cuDNN's shape of an attention call, under a 16-bit precision (fp8's attention is bf16).
  SdpaShape sdpa_shape(int B, int T, int C, int NH) const {
    check(prec_ != Precision::fp32,
          "train.attention = 'cudnn' takes 16-bit operands; train.precision = fp32 has none");
    return {B, T, C, NH, prec_ == Precision::fp16};
  }
  /// cuDNN's qkv (n values): a bf16 qkv as it is, an f32 one rounded to 16 bits into scratch
  /// (the own flash kernels round it as they load it).
  const uint16_t* sdpa_operand(ConstDevPtr qkv, int64_t n, const SdpaShape& sh) {
    if (const uint16_t* q16 = as16(qkv)) return q16;
    uint16_t* r = sdpa_qkv_.template as<uint16_t>(n);
    K::round16(rt_.stream(), r, qkv.f32(), n, !sh.f16);
    return r;
  }
  /// out and lse through cuDNN: qkv in 16 bits (sdpa_operand), out written in 16 bits and
  /// widened when it is an f32 tensor.
  void cudnn_forward(DevPtr out, float* lse, ConstDevPtr qkv, int B, int T, int C, int NH) {
    const SdpaShape sh = sdpa_shape(B, T, C, NH);
    const int64_t N = int64_t(B) * T;
    const uint16_t* q16 = sdpa_operand(qkv, N * 3 * C, sh);
    uint16_t* o16 = as16(out);
    uint16_t* o = o16 ? o16 : sdpa_out_.template as<uint16_t>(N * C);
    rt_.sdpa_forward(o, lse, q16, sh);
    if (!o16) K::widen16(rt_.stream(), out.f32(), o, N * C, !sh.f16);
  }
  /// dqkv through cuDNN: qkv, out and dout rounded to 16 bits (out exactly: it was 16-bit
  /// before it was widened), dqkv widened when it is an f32 tensor.
  void cudnn_backward(DevPtr dqkv, const float* dout, ConstDevPtr qkv, ConstDevPtr out,
                      const float* lse, int B, int T, int C, int NH) {
    const SdpaShape sh = sdpa_shape(B, T, C, NH);
    const int64_t N = int64_t(B) * T;
    const uint16_t* q16 = sdpa_operand(qkv, N * 3 * C, sh);
    uint16_t* d16 = sdpa_dout_.template as<uint16_t>(N * C);
    K::round16(rt_.stream(), d16, dout, N * C, !sh.f16);
    const uint16_t* o = as16(out);
    if (!o) {
      uint16_t* t = sdpa_out_.template as<uint16_t>(N * C);
      K::round16(rt_.stream(), t, out.f32(), N * C, !sh.f16);
      o = t;
    }
    uint16_t* dq16 = as16(dqkv);
    uint16_t* dq = dq16 ? dq16 : sdpa_dqkv_.template as<uint16_t>(N * 3 * C);
    rt_.sdpa_backward(dq, d16, q16, o, lse, sh);
    if (!dq16) K::widen16(rt_.stream(), dqkv.f32(), dq, N * 3 * C, !sh.f16);
  }
  /// The qkv the attention kernels are given: an f32 qkv as it is; a bf16 one as it is where
  /// the flash form reads it (out16: the result is bf16 too), else widened (exactly) into f32.
  struct AttnQkv {
    const float* f32 = nullptr;
    const uint16_t* bf16 = nullptr;
  };
  AttnQkv attention_qkv(ConstDevPtr qkv, int64_t N, int C, int NH, bool out16) {
    const uint16_t* q16 = as16(qkv);
    if (!q16) return {qkv.f32(), nullptr};
    if (out16 && K::flash_reads_qkv16(C, NH, q16, flash())) return {nullptr, q16};
    float* w = qkv32_.template as<float>(N * 3 * C);
    K::widen16(rt_.stream(), w, q16, N * 3 * C, true);
    return {w, nullptr};
  }
  /// The attention kernels' operands: 16-bit tensor cores (the flash form) under the 16-bit
  /// precisions (fp8 too: its attention is bf16), f32 on CUDA cores under fp32.
  int flash() const { return prec_ == Precision::fp16 ? 2 : prec_ == Precision::fp32 ? 0 : 1; }
  static void check_heads(int C, int NH) {
    check(NH > 0 && C % NH == 0,
          fmt::format("cuda backend: {} channels do not split into {} heads", C, NH));
    check(C / NH <= cuda_math::kMaxHeadSize,
          fmt::format("cuda backend: head size {} (n_embd {} / n_head {}) is above the {} its "
                      "attention kernels take",
                      C / NH, C, NH, cuda_math::kMaxHeadSize));
  }
  /// Targets are checked on the host, as the reference does, so a bad token is an error that
  /// names it rather than a read outside the row: the host copy host_tokens() registered, or
  /// else the ids read back from the device.
  void check_targets(const int32_t* targets, int64_t N, int V) {
    const std::vector<int32_t>& t = tokens_of(targets, N);
    for (int64_t i = 0; i < N; ++i)
      if (t[i] < 0 || t[i] >= V)
        throw Error(
            fmt::format("target token {} at row {} is outside the vocabulary [0, {})", t[i], i, V));
  }
  /// The n token ids at device pointer dev on the host: the registered copy, or a read.
  const std::vector<int32_t>& tokens_of(const int32_t* dev, int64_t n) {
    if (auto it = host_tokens_.find(dev);
        it != host_tokens_.end() && int64_t(it->second.size()) == n)
      return it->second;
    tokens_host_.resize(n);
    copy_to_host(tokens_host_.data(), dev, n * sizeof(int32_t));
    return tokens_host_;
  }
  /// Host data to device memory without waiting: through one of kStaging pinned buffers,
  /// which are reused only after a synchronization (else the reuse waits for the device).
  void upload_staged(void* dst, const void* src, size_t bytes) {
    // while a graph is captured the buffers are not reused: its copies read them at launch
    if (!capturing_ && staged_since_sync_ >= kStaging) synchronize();
    const size_t k = staged_since_sync_++;
    if (staging_.size() <= k) staging_.resize(k + 1, nullptr), staging_bytes_.resize(k + 1, 0);
    if (staging_bytes_[k] < bytes) {
      if (staging_[k]) rt_.free_host(staging_[k]);
      staging_[k] = rt_.malloc_host(bytes);
      staging_bytes_[k] = bytes;
    }
    std::memcpy(staging_[k], src, bytes);
    rt_.h2d_async(dst, staging_[k], bytes);
  }
  /// The AdamW chunk table on the device for these tensors (uploaded when it changed), or null
  /// when there is nothing to update.
  const cuda_kernels::AdamChunk* chunk_table(float* const* p, const float* const* g,
                                             float* const* m, float* const* v, const int64_t* n,
                                             const float* wd, int count) {
    std::vector<cuda_kernels::AdamChunk> t;
    for (int i = 0; i < count; ++i)
      for (int64_t b = 0; b < n[i]; b += kAdamChunk)
        t.push_back({p[i], g[i], m[i], v[i], b, std::min(n[i], b + kAdamChunk), wd[i]});
    if (t.empty()) return nullptr;
    auto* d = chunks_.template as<cuda_kernels::AdamChunk>(static_cast<int64_t>(t.size()));
    auto same = [](const cuda_kernels::AdamChunk& a, const cuda_kernels::AdamChunk& b) {
      return a.p == b.p && a.g == b.g && a.m == b.m && a.v == b.v && a.begin == b.begin &&
             a.end == b.end && a.wd == b.wd;
    };
    if (d != chunks_at_ ||
        !std::equal(t.begin(), t.end(), chunks_host_.begin(), chunks_host_.end(), same)) {
      chunks_host_ = std::move(t);
      upload_staged(d, chunks_host_.data(), chunks_host_.size() * sizeof(cuda_kernels::AdamChunk));
      chunks_at_ = d;
    }
    return d;
  }

  uint16_t* as16(DevPtr p) const {
    if (!p.bf16()) return nullptr;
    check(prec_ == Precision::bf16,
          fmt::format("cuda backend: a bf16 tensor argument under precision {}; bf16 tensors "
                      "belong to precision bf16",
                      to_string(prec_)));
    return p.u16();
  }
  const uint16_t* as16(ConstDevPtr p) const {
    return as16(DevPtr(const_cast<void*>(p.data), p.dtype));
  }
  static float* f32_or_null(DevPtr p) { return p.bf16() ? nullptr : p.f32(); }
  static const float* f32(ConstDevPtr p) {
    check(!p.bf16(), "cuda backend: a bf16 tensor where this op under this precision takes f32");
    return p.f32();
  }
  LtType type16() const { return prec_ == Precision::fp16 ? LtType::f16 : LtType::bf16; }

  /// A product operand: f32 under fp32; else a bf16 tensor as it is, or x rounded into buf
  /// (fp16 under fp16; bf16 under bf16, and under fp8 for products fp8 cannot take).
  LtOperand operand(DevBuffer<RT>& buf, ConstDevPtr x, int64_t n) {
    if (prec_ == Precision::fp32) return {f32(x), LtType::f32};
    if (const uint16_t* x16 = as16(x)) return {x16, LtType::bf16};
    uint16_t* o = buf.template as<uint16_t>(n);
    K::round16(rt_.stream(), o, x.f32(), n, prec_ != Precision::fp16);
    return {o, type16()};
  }
  /// The weight operand: w itself under fp32, else its 16-bit copy, refreshed after
  /// weights_updated() (stochastic rounding as the CPU backend when asked for, bf16 only).
  LtOperand weight_operand(const float* w, int64_t n) {
    if (prec_ == Precision::fp32) return {w, LtType::f32};
    auto [it, fresh] = weights_.try_emplace(w, &rt_);
    WeightCopy& c = it->second;
    if (fresh) c.id = weights_.size();  // first-use order: the same in every run of a model
    if (c.generation != generation_ || c.n != n) {
      uint16_t* o = c.data.template as<uint16_t>(n);
      if (sr_ && prec_ == Precision::bf16)
        K::round_bf16_stochastic(rt_.stream(), o, w, n,
                                 cuda_math::splitmix64(sr_seed_ ^ (c.id * 0x9E3779B97F4A7C15ull)));
      else
        K::round16(rt_.stream(), o, w, n, prec_ != Precision::fp16);
      c.generation = generation_;
      c.n = n;
    }
    return {c.data.template as<uint16_t>(n), type16()};
  }
  static LtOperand pick(cuda_plan::Role r, LtOperand w, LtOperand x, LtOperand d) {
    return r == cuda_plan::Role::weight ? w : r == cuda_plan::Role::input ? x : d;
  }

  /// What matmul_backward_gelu's dinp is multiplied by: nothing (gelu null), gelu itself
  /// (GeluSaved::derivative), or gelu' of it (GeluSaved::input).
  struct SavedGelu {
    ConstDevPtr gelu;
    GeluSaved saved = GeluSaved::derivative;
  };
  /// dinp (assigned; times gelu' when given), dw += inp^T dout, dbias += column sums of dout
  /// (under bf16 of the rounded dout the products use, as the CPU backend). With the GELU's
  /// input saved, under 16-bit precisions, cuBLASLt's DGELU epilogue multiplies in the
  /// product (aux: the input, of dinp's type), as llm.c's backward. Under bf16 and fp16 the
  /// column sums are the dW product's bias gradient epilogue (BGRADA/BGRADB: under fp16 of the
  /// fp16 dout); fp32, fp8 and a refused epilogue keep the column-sum kernel.
  void backward_products(DevPtr dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                         const float* w, SavedGelu gelu, int64_t N, int C, int OC, bool wt) {
    if (fp8_backward(dinp, dw, dbias, dout, inp, w, gelu, N, C, OC, wt)) return;
    const LtOperand D = operand(act_a_, dout, N * OC);
    const LtOperand X = operand(act_b_, inp, N * C);
    if (dinp) {
      const LtOperand W = weight_operand(w, int64_t(C) * OC);
      const auto g = cuda_plan::backward_input(N, C, OC, wt);
      const LtOperand A = pick(g.a, W, X, D), B = pick(g.b, W, X, D);
      const LtType td = dinp.bf16() ? LtType::bf16 : LtType::f32;
      if (!gelu.gelu && !dinp.bf16()) {
        product(g, A, B, dinp.f32(), LtType::f32, nullptr, {});
      } else if (!(gelu.gelu && gelu.saved == GeluSaved::input && prec_ != Precision::fp32 &&
                   gelu.gelu.dtype == dinp.dtype &&
                   product(g, A, B, dinp.data, td, nullptr,
                           {cuda_plan::LtEpi::dgelu, gelu.gelu.data, C}, /*may_fail=*/true))) {
        float* prod = prod_.template as<float>(N * C);
        product(g, A, B, prod, LtType::f32, nullptr, {});
        finish_dinp(dinp, prod, gelu, N * C);
      }
    }
    const auto g = cuda_plan::backward_weight(N, C, OC, wt);
    const LtOperand A = pick(g.a, {}, X, D), B = pick(g.b, {}, X, D);
    if (dbias && (prec_ == Precision::bf16 || prec_ == Precision::fp16)) {
      // the bias gradient in dW's product: cuBLASLt's BGRADA/BGRADB sums the 16-bit dout the
      // product reads (f32, dW's type), as Transformer Engine's wgrad GEMM; the epilogue
      // writes it, so it goes to scratch and is added to dbias (accumulated)
      float* db = bgrad_.template as<float>(OC);
      if (product(g, A, B, dw, LtType::f32, db, {cuda_plan::bias_gradient_epilogue(g)},
                  /*may_fail=*/true)) {
        K::bias_add(rt_.stream(), dbias, db, 1, OC);
        return;
      }
    }
    product(g, A, B, dw, LtType::f32, nullptr, {});
    if (dbias) {
      float* partial = partial_.template as<float>(K::column_partial_floats(N, OC));
      if (prec_ == Precision::bf16)
        K::column_sums(rt_.stream(), dbias, nullptr, static_cast<const uint16_t*>(D.p), N, OC,
                       partial);
      else
        K::column_sums(rt_.stream(), dbias, f32(dout), nullptr, N, OC, partial);
    }
  }

  /// dinp = prod (times gelu' when given), f32 or bf16.
  void finish_dinp(DevPtr dinp, const float* prod, SavedGelu gelu, int64_t n) {
    if (gelu.gelu) {
      const uint16_t* g16 = as16(gelu.gelu);
      K::mul(rt_.stream(), f32_or_null(dinp), as16(dinp), prod, g16 ? nullptr : gelu.gelu.f32(),
             g16, n, gelu.saved == GeluSaved::input);
    } else {
      K::round16(rt_.stream(), as16(dinp), prod, n, true);
    }
  }

  // ---- fp8 (precision fp8): e4m3 weights and activations, e5m2 output gradients, per-tensor
  // delayed scaling (kernel_math.h), fp32 accumulation and outputs, fp32 master weights; the
  // block products only: the tied LM head (w_transposed) stays bf16, as Transformer Engine
  // keeps the head in higher precision. A product whose sizes cuBLASLt's fp8 kernels do not
  // take runs in bf16 too.
  enum Fp8Use { kWeightFwd, kWeightBwd, kInput, kInputT, kGradT, kGrad };
  struct Fp8Copy {
    explicit Fp8Copy(RT* rt) : data(rt) {}
    DevBuffer<RT> data;
    uint64_t generation = UINT64_MAX;
  };
  /// The delayed-scaling state (cuda_math::kFp8StateFloats floats) of (owner, use), and whether
  /// it was made now (zeroed: its first use takes the tensor's own amax).
  std::pair<float*, bool> fp8_state(const float* owner, Fp8Use use) {
    auto [st, fresh] = fp8_state_.try_emplace({owner, int(use)}, &rt_);
    // (recorded before its memory is allocated, which a capture refuses)
    if (fresh && capturing_) made_in_capture_.push_back(st->first);
    float* state = st->second.template as<float>(cuda_math::kFp8StateFloats);
    if (fresh) rt_.memset0(state, cuda_math::kFp8StateFloats * sizeof(float));
    return {state, fresh};
  }
  /// The fp8 copy of x (rows, cols), transposed when asked. Its scaling state belongs to the
  /// product and the operand (owner: the product's weight, which names the layer and the
  /// product; use: which operand), one per (layer, GEMM, operand) as Transformer Engine keeps
  /// them, so the scratch tensors every layer reuses do not share one amax history. A weight's
  /// copy is kept and remade only after weights_updated(); an activation's or gradient's goes
  /// into a scratch buffer per use.
  LtOperand fp8_operand(const float* x, int64_t rows, int64_t cols, bool transpose, bool e5m2,
                        Fp8Use use, const float* owner) {
    const auto [state, fresh] = fp8_state(owner, use);
    const bool weight = use == kWeightFwd || use == kWeightBwd;
    uint8_t* q;
    if (weight) {
      Fp8Copy& c = fp8_weights_.try_emplace({x, int(use)}, &rt_).first->second;
      q = c.data.template as<uint8_t>(rows * cols);
      if (c.generation != generation_) {
        K::fp8_quantize(rt_.stream(), q, x, rows, cols, transpose, e5m2, state, fresh);
        c.generation = generation_;
      }
    } else {
      q = fp8_scratch_.try_emplace(int(use), &rt_).first->second.template as<uint8_t>(rows * cols);
      K::fp8_quantize(rt_.stream(), q, x, rows, cols, transpose, e5m2, state, fresh);
    }
    return {q, e5m2 ? LtType::e5m2 : LtType::e4m3, state + cuda_math::kFp8Dequant};
  }
  /// The fp8 copies of a gradient x (rows, cols) in both layouts, from one read of it
  /// (fp8_quantize_both) and one scaling state, the (owner, kGrad) one: both operands of the
  /// backward's products (dinp's takes x, dw's its transpose) with one scale, as Transformer
  /// Engine's cast_transpose gives them. (Two states, one a use, saw the same amax every step:
  /// the scales are those two casts had.)
  std::pair<LtOperand, LtOperand> fp8_gradient_operands(const float* x, int64_t rows, int64_t cols,
                                                        const float* owner) {
    const auto [state, fresh] = fp8_state(owner, kGrad);
    auto* q =
        fp8_scratch_.try_emplace(int(kGrad), &rt_).first->second.template as<uint8_t>(rows * cols);
    auto* qt =
        fp8_scratch_.try_emplace(int(kGradT), &rt_).first->second.template as<uint8_t>(rows * cols);
    K::fp8_quantize_both(rt_.stream(), q, qt, x, rows, cols, true, state, fresh);
    const float* dq = state + cuda_math::kFp8Dequant;
    return {{q, LtType::e5m2, dq}, {qt, LtType::e5m2, dq}};
  }
  /// out(N,OC) = inp @ W in fp8 (no bias); false when not fp8 or the sizes do not fit.
  bool fp8_forward(float* out, ConstDevPtr inp, const float* w, int64_t N, int C, int OC, bool wt) {
    if (prec_ != Precision::fp8 || wt || !cuda_plan::fp8_sizes_ok(N, C, OC)) return false;
    // A = W^T (OC,C): w (C,OC) transposed
    const LtOperand W = fp8_operand(w, C, OC, true, false, kWeightFwd, w);
    const LtOperand X = fp8_operand(f32(inp), N, C, false, false, kInput, w);
    product(cuda_plan::forward_fp8(N, C, OC), W, X, out, LtType::f32, nullptr, {});
    return true;
  }
  bool fp8_backward(DevPtr dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                    const float* w, SavedGelu gelu, int64_t N, int C, int OC, bool wt) {
    if (prec_ != Precision::fp8 || wt || !cuda_plan::fp8_sizes_ok(N, C, OC)) return false;
    const float* d = f32(dout);
    const auto [G, GT] = fp8_gradient_operands(d, N, OC, w);  // dout (N,OC), dout^T (OC,N)
    if (dinp) {
      // A = W (C,OC): w itself
      const LtOperand W = fp8_operand(w, C, OC, false, false, kWeightBwd, w);
      const auto g = cuda_plan::backward_input_fp8(N, C, OC);
      float* prod = gelu.gelu || dinp.bf16() ? prod_.template as<float>(N * C) : dinp.f32();
      product(g, W, G, prod, LtType::f32, nullptr, {});
      if (prod != dinp.f32()) finish_dinp(dinp, prod, gelu, N * C);
    }
    const LtOperand XT = fp8_operand(f32(inp), N, C, true, false, kInputT, w);  // inp^T (C,N)
    const auto g = cuda_plan::backward_weight_fp8(N, C, OC, wt);
    product(g, pick(g.a, {}, XT, GT), pick(g.b, {}, XT, GT), dw, LtType::f32, nullptr, {});
    if (dbias) {
      float* partial = partial_.template as<float>(K::column_partial_floats(N, OC));
      K::column_sums(rt_.stream(), dbias, d, nullptr, N, OC, partial);
    }
    return true;
  }

  /// D (m x n, column-major, type td) = op(A) op(B) + beta D, the runtime's product (cuBLASLt
  /// on the GPU); with may_fail, false when it has no algorithm for the epilogue.
  bool product(const cuda_plan::Gemm& g, LtOperand A, LtOperand B, void* Dp, LtType td,
               const void* bias, cuda_plan::LtEpilogue ep, bool may_fail = false) {
    return rt_.product(g, A, B, Dp, td, bias, ep, may_fail);
  }

  struct WeightCopy {
    explicit WeightCopy(RT* rt) : data(rt) {}
    DevBuffer<RT> data;
    uint64_t generation = UINT64_MAX;
    uint64_t id = 0;
    int64_t n = 0;
  };

  RT rt_;
  int index_;
  std::map<std::pair<const void*, int>, DevBuffer<RT>> fp8_state_;  ///< (owner weight, use)
  std::map<std::pair<const void*, int>, Fp8Copy> fp8_weights_;      ///< (weight, use)
  std::map<int, DevBuffer<RT>> fp8_scratch_;                        ///< use
  DevBuffer<RT> act_a_{&rt_}, act_b_{&rt_}, prod_{&rt_}, partial_{&rt_}, delta_{&rt_},
      token_index_{&rt_}, chunks_{&rt_}, squares_{&rt_};
  DevBuffer<RT> bgrad_{&rt_};  ///< the bias gradient epilogue's output (OC floats)
  bool cudnn_ = false;         ///< train.attention = cudnn
  DevBuffer<RT> sdpa_qkv_{&rt_}, sdpa_out_{&rt_}, sdpa_dout_{&rt_}, sdpa_dqkv_{&rt_};
  DevBuffer<RT> qkv32_{&rt_};  ///< a bf16 qkv widened, where the flash form cannot read it
  std::vector<int32_t> tokens_host_, index_host_;
  std::unordered_map<const int32_t*, std::vector<int32_t>> host_tokens_;
  /// Pinned upload buffers between synchronizations: enough for a step of up to 63
  /// micro-batches (an index each, and the AdamW chunk table), so that the process's first
  /// step, which runs without a graph, makes every buffer a captured step uses.
  static constexpr size_t kStaging = 64;
  std::vector<void*> staging_;
  std::vector<size_t> staging_bytes_;
  size_t staged_since_sync_ = 0;
  AdamStepResult* result_ = nullptr;  ///< pinned
  DevBuffer<RT> flag_{&rt_};
  std::vector<cuda_kernels::AdamChunk> chunks_host_;  ///< the table uploaded to chunks_at_
  const cuda_kernels::AdamChunk* chunks_at_ = nullptr;
  Precision prec_ = Precision::fp32;
  bool sr_ = false;
  uint64_t sr_seed_ = 0;
  uint64_t generation_ = 0;
  std::unordered_map<const float*, WeightCopy> weights_;
  bool capturing_ = false;  ///< between begin_graph() and launch_graph()/abandon_graph()
  std::vector<std::pair<const void*, int>> made_in_capture_;  ///< fp8 states made while capturing
  GraphStats graph_stats_;
};

}  // namespace gt::cuda_impl
