// backend/cuda/cuda_backend.cpp: the CUDA backend's device memory, precision policy and
// matrix products (cuBLASLt); the other ops launch the own kernels of kernels.cu. Everything
// runs on one stream of the backend; copies to the host wait for it.
#include "backend/cuda/cuda_backend.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "backend/cuda/host_plan.h"
#include "backend/cuda/kernel_math.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace gt {
namespace {

namespace k = cuda_kernels;

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(
        fmt::format("CUDA: {} failed: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}
void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("cuBLASLt: {} failed: {}", what, cublasLtGetStatusString(s)));
}

/// Bytes of cuBLASLt's workspace: 32 MiB, as NVIDIA recommends for Hopper (cuBLAS docs,
/// "cublasSetWorkspace").
constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;
/// Elements per block of the multi-tensor AdamW.
constexpr int64_t kAdamChunk = int64_t(1) << 16;
/// Interleaved partial sums of sum_squares (kernel_math.h): a constant, so the result is the
/// same on every GPU.
constexpr int64_t kSumSquaresParts = int64_t(1) << 14;

/// A device buffer that grows (never shrinks) to the largest size asked of it.
class DevBuffer {
 public:
  DevBuffer() = default;
  DevBuffer(const DevBuffer&) = delete;
  DevBuffer& operator=(const DevBuffer&) = delete;
  DevBuffer(DevBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr, o.bytes_ = 0; }
  ~DevBuffer() {
    if (p_) cudaFree(p_);
  }
  /// At least `bytes` of device memory (the old contents are lost when it grows).
  void* get(size_t bytes) {
    if (bytes > bytes_) {
      if (p_) cuda_check(cudaFree(p_), "cudaFree");
      p_ = nullptr;
      bytes_ = 0;
      const cudaError_t e = cudaMalloc(&p_, bytes);
      if (e != cudaSuccess)
        throw Error(fmt::format("cuda backend: cannot allocate {} bytes of scratch: {}", bytes,
                                cudaGetErrorString(e)));
      bytes_ = bytes;
    }
    return p_;
  }
  template <typename T>
  T* as(int64_t n) {
    return static_cast<T*>(get(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T)));
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

/// A cuBLASLt operand: device pointer and element type.
struct LtOperand {
  const void* p;
  cudaDataType_t type;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int index, const BackendOptions&) : index_(index) {
    cuda_check(cudaSetDevice(index), "cudaSetDevice");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    lt_check(cublasLtCreate(&lt_), "cublasLtCreate");
    lt_workspace_.get(kLtWorkspaceBytes);
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    if (lt_) cublasLtDestroy(lt_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return fmt::format("cuda:{}", index_); }

  // ---- memory -------------------------------------------------------------------------
  Device device() const override { return Device::cuda; }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
    if (e != cudaSuccess)
      throw Error(fmt::format("cuda:{}: cannot allocate {} bytes of device memory: {}", index_,
                              bytes, cudaGetErrorString(e)));
    return p;  // cudaMalloc aligns to 256 bytes
  }
  void deallocate(void* p) override {
    if (p) {
      cudaStreamSynchronize(stream_);
      cudaFree(p);
    }
  }
  void zero(void* p, size_t bytes) override {
    cuda_check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync");
  }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync (to the device)");
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");  // src may go now
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync (to the host)");
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void synchronize() override {
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  // ---- capabilities -------------------------------------------------------------------
  bool supports(Op, Precision p) const override { return p != Precision::fp8; }
  /// cuBLASLt's workspace; for 16-bit precisions the weight copies and the rounded operands
  /// (N*max(hidden,V), and N*hidden for the backward's input); the product buffer of the
  /// fused GELU backward and GELU epilogue fallback (N*max(hidden,V) floats); partial sums,
  /// attention row sums (B*NH*T) and the embedding backward's token index (3N ints).
  size_t workspace_bytes(const WorkspaceQuery& q) const override {
    const int64_t wide = std::max<int64_t>({q.hidden, q.V, q.C});
    size_t bytes =
        kLtWorkspaceBytes + static_cast<size_t>(q.N * wide) * 4 +
        static_cast<size_t>(k::layernorm_partial_floats(q.N, static_cast<int>(wide))) * 4 +
        static_cast<size_t>(q.N * q.NH) * 4 + static_cast<size_t>(3 * q.N + 1) * 4;
    if (q.precision != Precision::fp32) {
      const bool act16 = q.bf16_activations && q.precision == Precision::bf16;
      bytes += static_cast<size_t>(q.weight_elems + q.N * wide + (act16 ? 0 : q.N * q.hidden)) * 2;
    }
    return bytes;
  }

  // ---- embedding ----------------------------------------------------------------------
  void embedding_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                         int T, int C) override {
    k::embedding_forward(stream_, out, inp, wte, wpe, B, T, C);
  }
  /// The token ids come to the host (B*T ints) for a counting sort by token, so that each
  /// row of dwte is summed by one thread in the order of positions: no atomics on floats.
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                          int T, int C) override {
    const int64_t n = int64_t(B) * T;
    tokens_host_.resize(n);
    copy_to_host(tokens_host_.data(), inp, n * sizeof(int32_t));
    for (int32_t t : tokens_host_)
      check(t >= 0, fmt::format("embedding_backward: token id {} is negative", t));
    std::vector<int32_t>& idx = index_host_;
    const int32_t U = cuda_plan::token_index(tokens_host_, idx);
    int32_t* d = token_index_.as<int32_t>(static_cast<int64_t>(idx.size()));
    copy_to_device(d, idx.data(), idx.size() * sizeof(int32_t));
    k::embedding_backward(stream_, dwte, dwpe, dout, d, d + U, d + 2 * U + 1, U, B, T, C);
  }

  // ---- LayerNorm ----------------------------------------------------------------------
  void layernorm_forward(DevPtr out, float* mean, float* rstd, const float* inp, const float* w,
                         const float* b, int64_t N, int C) override {
    k::layernorm_forward(stream_, f32_or_null(out), as16(out), mean, rstd, inp, w, b, N, C);
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                          const float* w, const float* mean, const float* rstd, int64_t N,
                          int C) override {
    k::layernorm_backward(stream_, dinp, dw, db, dout, inp, w, mean, rstd, N, C,
                          partial_.as<float>(k::layernorm_partial_floats(N, C)));
  }
  void residual_layernorm_forward(float* res, DevPtr out, float* mean, float* rstd, const float* a,
                                  const float* b, const float* w, const float* bias, int64_t N,
                                  int C) override {
    k::residual_layernorm_forward(stream_, res, f32_or_null(out), as16(out), mean, rstd, a, b, w,
                                  bias, N, C);
  }

  // ---- matrix products ----------------------------------------------------------------
  void matmul_forward(float* out, ConstDevPtr inp, const float* w, const float* bias, int64_t N,
                      int C, int OC, bool w_transposed) override {
    const auto g = cuda_plan::forward(N, C, OC, w_transposed);
    const LtOperand W = weight_operand(w, int64_t(C) * OC), X = operand(act_a_, inp, N * C);
    product(g, pick(g.a, W, X, {}), pick(g.b, W, X, {}), out, CUDA_R_32F, bias, false);
  }
  /// The GELU is cuBLASLt's epilogue (tanh form) under 16-bit precisions; under fp32 the own
  /// bias+GELU kernel follows a plain product, so fp32 stays within fp32 rounding of the
  /// reference's GELU.
  void matmul_gelu_forward(DevPtr out, ConstDevPtr inp, const float* w, const float* bias,
                           int64_t N, int C, int OC) override {
    const auto g = cuda_plan::forward(N, C, OC, false);
    const LtOperand W = weight_operand(w, int64_t(C) * OC), X = operand(act_a_, inp, N * C);
    uint16_t* o16 = as16(out);
    if (prec_ != Precision::fp32) {
      // the bias has the output's type (cuBLASLt: CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE)
      const void* b = bias && o16 ? weight_operand(bias, OC).p : bias;
      if (product(g, W, X, out.data, o16 ? CUDA_R_16BF : CUDA_R_32F, b, true, /*may_fail=*/true))
        return;
    }
    float* prod = prod_.as<float>(N * OC);
    product(g, W, X, prod, CUDA_R_32F, nullptr, false);
    k::bias_gelu(stream_, f32_or_null(out), o16, prod, bias, N, OC);
  }
  void matmul_backward(float* dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                       const float* w, int64_t N, int C, int OC, bool w_transposed) override {
    backward_products(dinp, dw, dbias, dout, inp, w, {}, N, C, OC, w_transposed);
  }
  void matmul_backward_gelu(DevPtr dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                            const float* w, ConstDevPtr dgelu, int64_t N, int C, int OC) override {
    backward_products(dinp, dw, dbias, dout, inp, w, dgelu, N, C, OC, false);
  }

  // ---- attention ----------------------------------------------------------------------
  void attention_forward(DevPtr out, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    check_heads(C, NH);
    k::attention_forward(stream_, f32_or_null(out), as16(out), nullptr, att, qkv, B, T, C, NH);
  }
  void attention_backward(DevPtr dqkv, const float* dout, const float* qkv, const float* att, int B,
                          int T, int C, int NH) override {
    check_heads(C, NH);
    k::attention_backward(stream_, f32_or_null(dqkv), as16(dqkv), dout, qkv, att, nullptr, nullptr,
                          nullptr, delta_.as<float>(int64_t(B) * NH * T), B, T, C, NH);
  }
  void attention_forward_fused(DevPtr out, float* lse, const float* qkv, int B, int T, int C,
                               int NH) override {
    check_heads(C, NH);
    k::attention_forward(stream_, f32_or_null(out), as16(out), lse, nullptr, qkv, B, T, C, NH);
  }
  void attention_backward_fused(DevPtr dqkv, const float* dout, const float* qkv, ConstDevPtr out,
                                const float* lse, int B, int T, int C, int NH) override {
    check_heads(C, NH);
    const uint16_t* o16 = as16(out);
    k::attention_backward(stream_, f32_or_null(dqkv), as16(dqkv), dout, qkv, nullptr, lse,
                          o16 ? nullptr : out.f32(), o16, delta_.as<float>(int64_t(B) * NH * T), B,
                          T, C, NH);
  }

  // ---- element-wise -------------------------------------------------------------------
  void gelu_forward(DevPtr out, const float* inp, int64_t N) override {
    k::gelu_forward(stream_, f32_or_null(out), as16(out), inp, N);
  }
  void gelu_backward(DevPtr dinp, const float* inp, const float* dout, int64_t N) override {
    k::gelu_backward(stream_, f32_or_null(dinp), as16(dinp), inp, dout, N);
  }
  void gelu_forward_fused(DevPtr out, DevPtr dgelu, const float* inp, int64_t N) override {
    k::gelu_forward_fused(stream_, f32_or_null(out), as16(out), f32_or_null(dgelu), as16(dgelu),
                          inp, N);
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t N) override {
    k::residual(stream_, out, a, b, N);
  }

  // ---- loss ---------------------------------------------------------------------------
  void softmax_crossentropy_forward(float* probs, float* losses, const float* logits,
                                    const int32_t* targets, int64_t N, int V) override {
    check_targets(targets, N, V);
    k::softmax_ce_forward(stream_, probs, losses, logits, targets, N, V);
  }
  void softmax_crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets,
                                     float dloss, int64_t N, int V) override {
    k::softmax_ce_backward(stream_, dlogits, probs, targets, dloss, N, V);
  }
  void softmax_crossentropy_fused(float* logits, float* losses, const int32_t* targets, float dloss,
                                  int64_t N, int V) override {
    check_targets(targets, N, V);
    k::softmax_ce_fused(stream_, logits, losses, targets, dloss, N, V);
  }

  // ---- optimizer ----------------------------------------------------------------------
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, int64_t t) override {
    const auto [bc1, bc2_sqrt] = bias_corrections(beta1, beta2, t);
    k::adamw(stream_, p, g, m, v, n, 1.0f, lr, beta1, beta2, eps, 1.0f - lr * weight_decay, bc1,
             bc2_sqrt);
  }
  /// One launch over every tensor: a table of (tensor, range) chunks of kAdamChunk elements.
  void adamw_fused(float* const* p, const float* const* g, float* const* m, float* const* v,
                   const int64_t* n, const float* wd, int count, float grad_mult, float lr,
                   float beta1, float beta2, float eps, int64_t t) override {
    chunks_host_.clear();
    for (int i = 0; i < count; ++i)
      for (int64_t b = 0; b < n[i]; b += kAdamChunk)
        chunks_host_.push_back(
            {p[i], g[i], m[i], v[i], b, std::min(n[i], b + kAdamChunk), 1.0f - lr * wd[i]});
    if (chunks_host_.empty()) return;
    auto* d = chunks_.as<k::AdamChunk>(static_cast<int64_t>(chunks_host_.size()));
    copy_to_device(d, chunks_host_.data(), chunks_host_.size() * sizeof(k::AdamChunk));
    const auto [bc1, bc2_sqrt] = bias_corrections(beta1, beta2, t);
    k::adamw_multi(stream_, d, static_cast<int64_t>(chunks_host_.size()), grad_mult, lr, beta1,
                   beta2, eps, bc1, bc2_sqrt);
  }
  /// Interleaved partial sums in double on the GPU, added in order on the host.
  double sum_squares(const float* g, int64_t n) override {
    const int64_t K = std::min(kSumSquaresParts, std::max<int64_t>(n, 1));
    double* d = squares_.as<double>(K);
    k::sum_squares_partial(stream_, d, g, n, K);
    std::vector<double> h(K);
    copy_to_host(h.data(), d, K * sizeof(double));
    double s = 0.0;
    for (double x : h) s += x;
    return s;
  }
  void scale(float* g, float s, int64_t n) override { k::scale(stream_, g, s, n); }

  // ---- precision policy ---------------------------------------------------------------
  void set_precision(Precision p) override {
    if (p == Precision::fp8)
      throw Error(
          "train.precision = 'fp8': the CUDA backend of this build has no fp8 matrix products "
          "yet (delayed-scaling fp8 is planned for compute capability 9.0); use bf16");
    prec_ = p;
    weights_.clear();
  }
  Precision precision() const override { return prec_; }
  void set_stochastic_rounding(bool on, uint64_t seed) override {
    if (on != sr_ || seed != sr_seed_) ++generation_;
    sr_ = on;
    sr_seed_ = seed;
  }
  void weights_updated() override { ++generation_; }

 private:
  static std::pair<float, float> bias_corrections(float beta1, float beta2, int64_t t) {
    return {static_cast<float>(1.0 - std::pow(double(beta1), double(t))),
            static_cast<float>(std::sqrt(1.0 - std::pow(double(beta2), double(t))))};
  }
  static void check_heads(int C, int NH) {
    check(NH > 0 && C % NH == 0,
          fmt::format("cuda backend: {} channels do not split into {} heads", C, NH));
    check(C / NH <= cuda_math::kMaxHeadSize,
          fmt::format("cuda backend: head size {} (n_embd {} / n_head {}) is above the {} its "
                      "attention kernels take",
                      C / NH, C, NH, cuda_math::kMaxHeadSize));
  }
  /// Targets come to the host (N ints) to be checked, as the reference does, so a bad token
  /// is an error that names it rather than a read outside the row.
  void check_targets(const int32_t* targets, int64_t N, int V) {
    tokens_host_.resize(N);
    copy_to_host(tokens_host_.data(), targets, N * sizeof(int32_t));
    for (int64_t i = 0; i < N; ++i)
      if (tokens_host_[i] < 0 || tokens_host_[i] >= V)
        throw Error(fmt::format("target token {} at row {} is outside the vocabulary [0, {})",
                                tokens_host_[i], i, V));
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
  cudaDataType_t type16() const { return prec_ == Precision::fp16 ? CUDA_R_16F : CUDA_R_16BF; }

  /// A product operand: f32 under fp32; else a bf16 tensor as it is, or x rounded into buf.
  LtOperand operand(DevBuffer& buf, ConstDevPtr x, int64_t n) {
    if (prec_ == Precision::fp32) return {f32(x), CUDA_R_32F};
    if (const uint16_t* x16 = as16(x)) return {x16, CUDA_R_16BF};
    uint16_t* o = buf.as<uint16_t>(n);
    k::round16(stream_, o, x.f32(), n, prec_ == Precision::bf16);
    return {o, type16()};
  }
  /// The weight operand: w itself under fp32, else its 16-bit copy, refreshed after
  /// weights_updated() (stochastic rounding as the CPU backend when asked for, bf16 only).
  LtOperand weight_operand(const float* w, int64_t n) {
    if (prec_ == Precision::fp32) return {w, CUDA_R_32F};
    auto [it, fresh] = weights_.try_emplace(w);
    WeightCopy& c = it->second;
    if (fresh) c.id = weights_.size();  // first-use order: the same in every run of a model
    if (c.generation != generation_ || c.n != n) {
      uint16_t* o = c.data.as<uint16_t>(n);
      if (sr_ && prec_ == Precision::bf16)
        k::round_bf16_stochastic(stream_, o, w, n,
                                 cuda_math::splitmix64(sr_seed_ ^ (c.id * 0x9E3779B97F4A7C15ull)));
      else
        k::round16(stream_, o, w, n, prec_ == Precision::bf16);
      c.generation = generation_;
      c.n = n;
    }
    return {c.data.as<uint16_t>(n), type16()};
  }
  static LtOperand pick(cuda_plan::Role r, LtOperand w, LtOperand x, LtOperand d) {
    return r == cuda_plan::Role::weight ? w : r == cuda_plan::Role::input ? x : d;
  }

  /// dinp (assigned; times dgelu when given), dw += inp^T dout, dbias += column sums of dout
  /// (under bf16 of the rounded dout the products use, as the CPU backend).
  void backward_products(DevPtr dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                         const float* w, ConstDevPtr dgelu, int64_t N, int C, int OC, bool wt) {
    const LtOperand D = operand(act_a_, dout, N * OC);
    const LtOperand X = operand(act_b_, inp, N * C);
    if (dinp) {
      const LtOperand W = weight_operand(w, int64_t(C) * OC);
      const auto g = cuda_plan::backward_input(N, C, OC, wt);
      if (!dgelu && !dinp.bf16()) {
        product(g, pick(g.a, W, X, D), pick(g.b, W, X, D), dinp.f32(), CUDA_R_32F, nullptr, false);
      } else {
        float* prod = prod_.as<float>(N * C);
        product(g, pick(g.a, W, X, D), pick(g.b, W, X, D), prod, CUDA_R_32F, nullptr, false);
        if (dgelu) {
          const uint16_t* g16 = as16(dgelu);
          k::mul(stream_, f32_or_null(dinp), as16(dinp), prod, g16 ? nullptr : dgelu.f32(), g16,
                 N * C);
        } else {
          k::round16(stream_, as16(dinp), prod, N * C, true);
        }
      }
    }
    const auto g = cuda_plan::backward_weight(N, C, OC, wt);
    product(g, pick(g.a, {}, X, D), pick(g.b, {}, X, D), dw, CUDA_R_32F, nullptr, false);
    if (dbias) {
      float* partial = partial_.as<float>(k::column_partial_floats(N, OC));
      if (prec_ == Precision::bf16)
        k::column_sums(stream_, dbias, nullptr, static_cast<const uint16_t*>(D.p), N, OC, partial);
      else
        k::column_sums(stream_, dbias, f32(dout), nullptr, N, OC, partial);
    }
  }

  /// D (m x n, column-major, type td) = op(A) op(B) + beta D through cuBLASLt, fp32
  /// accumulation, with the bias (length m; type of D) and/or GELU epilogue. Algorithms
  /// without split-K reductions only (CUBLASLT_REDUCTION_SCHEME_NONE): deterministic. With
  /// may_fail, returns false when cuBLASLt has no algorithm for the epilogue (the caller then
  /// applies it itself); otherwise that is an error.
  bool product(const cuda_plan::Gemm& g, LtOperand A, LtOperand B, void* Dp, cudaDataType_t td,
               const void* bias, bool gelu, bool may_fail = false) {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    struct Cleanup {
      cublasLtMatmulDesc_t& op;
      cublasLtMatrixLayout_t &la, &lb, &ld;
      cublasLtMatmulPreference_t& pref;
      ~Cleanup() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (ld) cublasLtMatrixLayoutDestroy(ld);
        if (lb) cublasLtMatrixLayoutDestroy(lb);
        if (la) cublasLtMatrixLayoutDestroy(la);
        if (op) cublasLtMatmulDescDestroy(op);
      }
    } cleanup{op, la, lb, ld, pref};
    lt_check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
    const cublasOperation_t ta = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
             "set TRANSA");
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
             "set TRANSB");
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_DEFAULT;
    if (bias && gelu)
      ep = CUBLASLT_EPILOGUE_GELU_BIAS;
    else if (bias)
      ep = CUBLASLT_EPILOGUE_BIAS;
    else if (gelu)
      ep = CUBLASLT_EPILOGUE_GELU;
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)),
             "set EPILOGUE");
    if (bias)
      lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof(bias)),
               "set BIAS_POINTER");
    lt_check(cublasLtMatrixLayoutCreate(&la, A.type, g.ta ? g.k : g.m, g.ta ? g.m : g.k, g.lda),
             "layout A");
    lt_check(cublasLtMatrixLayoutCreate(&lb, B.type, g.tb ? g.n : g.k, g.tb ? g.k : g.n, g.ldb),
             "layout B");
    lt_check(cublasLtMatrixLayoutCreate(&ld, td, g.m, g.n, g.ldd), "layout D");
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate");
    const uint64_t ws = kLtWorkspaceBytes;
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof(ws)),
             "set MAX_WORKSPACE_BYTES");
    const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                  &reduction, sizeof(reduction)),
             "set REDUCTION_SCHEME_MASK");
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    const cublasStatus_t hs =
        cublasLtMatmulAlgoGetHeuristic(lt_, op, la, lb, ld, ld, pref, 1, &heur, &found);
    if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
      if (may_fail) return false;
      throw Error(fmt::format(
          "cuBLASLt has no algorithm for the product ({} x {} x {}, transa {}, transb {}, "
          "epilogue {}): {}",
          g.m, g.n, g.k, g.ta, g.tb, static_cast<int>(ep), cublasLtGetStatusString(hs)));
    }
    const float alpha = 1.0f, beta = g.beta;
    lt_check(cublasLtMatmul(lt_, op, &alpha, A.p, la, B.p, lb, &beta, Dp, ld, Dp, ld, &heur.algo,
                            lt_workspace_.get(kLtWorkspaceBytes), kLtWorkspaceBytes, stream_),
             "cublasLtMatmul");
    return true;
  }

  struct WeightCopy {
    DevBuffer data;
    uint64_t generation = UINT64_MAX;
    uint64_t id = 0;
    int64_t n = 0;
  };

  int index_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  DevBuffer lt_workspace_, act_a_, act_b_, prod_, partial_, delta_, token_index_, chunks_, squares_;
  std::vector<int32_t> tokens_host_, index_host_;
  std::vector<k::AdamChunk> chunks_host_;
  Precision prec_ = Precision::fp32;
  bool sr_ = false;
  uint64_t sr_seed_ = 0;
  uint64_t generation_ = 0;
  std::unordered_map<const float*, WeightCopy> weights_;
};

}  // namespace

int cuda_device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a failed runtime start
    if (why) *why = fmt::format("{} ({})", cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
  }
  if (n == 0 && why) *why = "the CUDA runtime reports 0 devices";
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int index, const BackendOptions& opt) {
  std::string why;
  const int n = cuda_device_count(&why);
  if (n == 0) throw Error(fmt::format("train.device = 'cuda:{}': no CUDA device: {}", index, why));
  if (index >= n)
    throw Error(
        fmt::format("train.device = 'cuda:{}': no such CUDA device; this process sees {} "
                    "(cuda:0 .. cuda:{}; CUDA_VISIBLE_DEVICES selects them)",
                    index, n, n - 1));
  return std::make_unique<CudaBackend>(index, opt);
}

}  // namespace gt
