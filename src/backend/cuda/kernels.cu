// backend/cuda/kernels.cu: indexing and launch of the CUDA backend's own kernels; the
// arithmetic is kernel_math.h's (tested on the host by tests/backend/cuda_host_math_test.cpp).
#include <string>

#include "backend/cuda/kernel_math.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace gt::cuda_kernels {
namespace {
namespace m = gt::cuda_math;

/// f(i) for every i in [0, n): one thread each.
template <typename F>
__global__ void for_each_index(int64_t n, F f) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(std::string("CUDA kernel ") + what + ": " + cudaGetErrorName(e) + " (" +
                cudaGetErrorString(e) + ")");
}

/// Launches f over [0, n) with `threads` per block: 256 for element-wise work, fewer for
/// rows (each thread's work is long; more blocks spread it over the SMs).
template <typename F>
void launch(cudaStream_t s, const char* what, int64_t n, F f, int threads = 256) {
  if (n <= 0) return;
  const int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 0x7FFFFFFF) throw Error(std::string("CUDA kernel ") + what + ": too many elements");
  for_each_index<<<static_cast<unsigned>(blocks), threads, 0, s>>>(n, f);
  check_launch(what);
}
constexpr int kRowThreads = 64;
using m::kColumnRows;

__global__ void adamw_multi_kernel(const AdamChunk* chunks, float grad_mult, float lr, float beta1,
                                   float beta2, float eps, float bc1, float bc2_sqrt) {
  const AdamChunk c = chunks[blockIdx.x];
  for (int64_t j = c.begin + threadIdx.x; j < c.end; j += blockDim.x)
    m::adamw_elem(j, c.p, c.g, c.m, c.v, grad_mult, lr, beta1, beta2, eps, c.decay, bc1, bc2_sqrt);
}
}  // namespace

void DeviceKernels::round16(cudaStream_t s, uint16_t* out, const float* x, int64_t n, bool bf16) {
  launch(s, "round16", n, [=] __device__(int64_t i) { m::round16_elem(i, out, x, bf16); });
}
void DeviceKernels::round_bf16_stochastic(cudaStream_t s, uint16_t* out, const float* x, int64_t n,
                                          uint64_t key) {
  launch(s, "round_bf16_stochastic", n,
         [=] __device__(int64_t i) { m::round_bf16_stochastic_elem(i, out, x, key); });
}

void DeviceKernels::embedding_forward(cudaStream_t s, float* out, const int32_t* inp,
                                      const float* wte, const float* wpe, int B, int T, int C) {
  launch(s, "embedding_forward", int64_t(B) * T * C,
         [=] __device__(int64_t i) { m::embedding_forward_elem(i, out, inp, wte, wpe, T, C); });
}
void DeviceKernels::embedding_backward(cudaStream_t s, float* dwte, float* dwpe, const float* dout,
                                       const int32_t* tokens, const int32_t* off,
                                       const int32_t* pos, int U, int B, int T, int C) {
  launch(s, "embedding_backward (wte)", int64_t(U) * C, [=] __device__(int64_t i) {
    m::embedding_backward_wte_elem(i, dwte, dout, tokens, off, pos, C);
  });
  launch(s, "embedding_backward (wpe)", int64_t(T) * C,
         [=] __device__(int64_t i) { m::embedding_backward_wpe_elem(i, dwpe, dout, B, T, C); });
}

void DeviceKernels::layernorm_forward(cudaStream_t s, float* o32, uint16_t* o16, float* mean,
                                      float* rstd, const float* inp, const float* w, const float* b,
                                      int64_t N, int C) {
  launch(
      s, "layernorm_forward", N,
      [=] __device__(int64_t i) {
        m::layernorm_forward_row(i, o32, o16, mean, rstd, inp, w, b, C);
      },
      kRowThreads);
}
void DeviceKernels::residual_layernorm_forward(cudaStream_t s, float* res, float* o32,
                                               uint16_t* o16, float* mean, float* rstd,
                                               const float* a, const float* b, const float* w,
                                               const float* bias, int64_t N, int C) {
  launch(
      s, "residual_layernorm_forward", N,
      [=] __device__(int64_t i) {
        m::residual_layernorm_row(i, res, o32, o16, mean, rstd, a, b, w, bias, C);
      },
      kRowThreads);
}
int64_t DeviceKernels::layernorm_partial_floats(int64_t N, int C) {
  return (N + kColumnRows - 1) / kColumnRows * 2 * C;
}
void DeviceKernels::layernorm_backward(cudaStream_t s, float* dinp, float* dw, float* db,
                                       const float* dout, const float* inp, const float* w,
                                       const float* mean, const float* rstd, int64_t N, int C,
                                       float* partial) {
  launch(
      s, "layernorm_backward", N,
      [=] __device__(int64_t i) {
        m::layernorm_backward_row(i, dinp, dout, inp, w, mean, rstd, C);
      },
      kRowThreads);
  const int64_t K = (N + kColumnRows - 1) / kColumnRows;
  launch(s, "layernorm_backward (partial sums)", K * C, [=] __device__(int64_t j) {
    m::layernorm_params_partial(j, partial, dout, inp, mean, rstd, N, C, kColumnRows);
  });
  launch(s, "layernorm_backward (dw)", C,
         [=] __device__(int64_t c) { m::column_finish(c, dw, partial, K, 2 * C); });
  launch(s, "layernorm_backward (db)", C,
         [=] __device__(int64_t c) { m::column_finish(c, db, partial + C, K, 2 * C); });
}
int64_t DeviceKernels::column_partial_floats(int64_t N, int C) {
  return (N + kColumnRows - 1) / kColumnRows * C;
}
void DeviceKernels::column_sums(cudaStream_t s, float* out, const float* x32, const uint16_t* x16,
                                int64_t N, int C, float* partial) {
  const int64_t K = (N + kColumnRows - 1) / kColumnRows;
  launch(s, "column_sums (partial)", K * C,
         [=] __device__(int64_t j) { m::column_partial(j, partial, x32, x16, N, C, kColumnRows); });
  launch(s, "column_sums", C,
         [=] __device__(int64_t c) { m::column_finish(c, out, partial, K, C); });
}

void DeviceKernels::gelu_forward(cudaStream_t s, float* o32, uint16_t* o16, const float* inp,
                                 int64_t n) {
  launch(s, "gelu_forward", n,
         [=] __device__(int64_t i) { m::gelu_forward_elem(i, o32, o16, inp); });
}
void DeviceKernels::gelu_backward(cudaStream_t s, float* d32, uint16_t* d16, const float* inp,
                                  const float* dout, int64_t n) {
  launch(s, "gelu_backward", n,
         [=] __device__(int64_t i) { m::gelu_backward_elem(i, d32, d16, inp, dout); });
}
void DeviceKernels::gelu_forward_fused(cudaStream_t s, float* o32, uint16_t* o16, float* g32,
                                       uint16_t* g16, const float* inp, int64_t n) {
  launch(s, "gelu_forward_fused", n,
         [=] __device__(int64_t i) { m::gelu_forward_fused_elem(i, o32, o16, g32, g16, inp); });
}
void DeviceKernels::bias_gelu(cudaStream_t s, float* o32, uint16_t* o16, const float* prod,
                              const float* bias, int64_t N, int OC) {
  launch(s, "bias_gelu", N * OC,
         [=] __device__(int64_t i) { m::bias_gelu_elem(i, o32, o16, prod, bias, OC); });
}
void DeviceKernels::mul(cudaStream_t s, float* o32, uint16_t* o16, const float* prod,
                        const float* g32, const uint16_t* g16, int64_t n) {
  launch(s, "mul", n, [=] __device__(int64_t i) { m::mul_elem(i, o32, o16, prod, g32, g16); });
}
void DeviceKernels::residual(cudaStream_t s, float* out, const float* a, const float* b,
                             int64_t n) {
  launch(s, "residual", n, [=] __device__(int64_t i) { m::residual_elem(i, out, a, b); });
}
void DeviceKernels::scale(cudaStream_t s, float* g, float f, int64_t n) {
  launch(s, "scale", n, [=] __device__(int64_t i) { m::scale_elem(i, g, f); });
}

void DeviceKernels::softmax_ce_forward(cudaStream_t s, float* probs, float* losses,
                                       const float* logits, const int32_t* targets, int64_t N,
                                       int V) {
  launch(
      s, "softmax_crossentropy_forward", N,
      [=] __device__(int64_t i) {
        m::softmax_ce_forward_row(i, probs, losses, logits, targets, V);
      },
      kRowThreads);
}
void DeviceKernels::softmax_ce_backward(cudaStream_t s, float* dlogits, const float* probs,
                                        const int32_t* targets, float dloss, int64_t N, int V) {
  launch(s, "softmax_crossentropy_backward", N * V, [=] __device__(int64_t i) {
    m::softmax_ce_backward_elem(i, dlogits, probs, targets, dloss, V);
  });
}
void DeviceKernels::softmax_ce_fused(cudaStream_t s, float* logits, float* losses,
                                     const int32_t* targets, float dloss, int64_t N, int V) {
  launch(
      s, "softmax_crossentropy_fused", N,
      [=] __device__(int64_t i) { m::softmax_ce_fused_row(i, logits, losses, targets, dloss, V); },
      kRowThreads);
}

void DeviceKernels::adamw(cudaStream_t s, float* p, const float* g, float* mm, float* v, int64_t n,
                          float grad_mult, float lr, float beta1, float beta2, float eps,
                          float decay, float bc1, float bc2_sqrt) {
  launch(s, "adamw_update", n, [=] __device__(int64_t j) {
    m::adamw_elem(j, p, g, mm, v, grad_mult, lr, beta1, beta2, eps, decay, bc1, bc2_sqrt);
  });
}
void DeviceKernels::adamw_multi(cudaStream_t s, const AdamChunk* chunks, int64_t count,
                                float grad_mult, float lr, float beta1, float beta2, float eps,
                                float bc1, float bc2_sqrt) {
  if (count <= 0) return;
  adamw_multi_kernel<<<static_cast<unsigned>(count), 256, 0, s>>>(chunks, grad_mult, lr, beta1,
                                                                  beta2, eps, bc1, bc2_sqrt);
  check_launch("adamw_fused");
}
void DeviceKernels::sum_squares_partial(cudaStream_t s, double* partial, const float* g, int64_t n,
                                        int64_t K) {
  launch(s, "sum_squares", K,
         [=] __device__(int64_t k) { m::sum_squares_partial(k, partial, g, n, K); });
}

void DeviceKernels::bias_add(cudaStream_t s, float* out, const float* bias, int64_t N, int OC) {
  launch(s, "bias_add", N * OC, [=] __device__(int64_t i) { m::bias_add_elem(i, out, bias, OC); });
}
void DeviceKernels::fp8_quantize(cudaStream_t s, uint8_t* out, const float* x, int64_t rows,
                                 int64_t cols, bool transpose, bool e5m2, float* state,
                                 float* partial) {
  const int64_t n = rows * cols, K = kFp8AmaxParts;
  launch(s, "fp8_quantize (amax)", K,
         [=] __device__(int64_t k) { m::amax_partial(k, partial, x, n, K); });
  const float fmax = e5m2 ? m::kE5m2Max : m::kE4m3Max;
  launch(s, "fp8_quantize (scale)", 1,
         [=] __device__(int64_t) { m::fp8_scale_step(state, partial, K, fmax); });
  launch(s, "fp8_quantize", n, [=] __device__(int64_t i) {
    m::fp8_quantize_elem(i, out, x, state, rows, cols, transpose, e5m2);
  });
}

namespace {
template <int HS>
void attention_forward_hs(cudaStream_t s, float* o32, uint16_t* o16, float* lse, float* att,
                          const float* qkv, m::AttnShape sh) {
  launch(
      s, "attention_forward", int64_t(sh.B) * sh.NH * sh.T,
      [=] __device__(int64_t r) { m::attention_forward_row<HS>(r, o32, o16, lse, att, qkv, sh); },
      kRowThreads);
}
template <int HS>
void attention_backward_hs(cudaStream_t s, float* d32, uint16_t* d16, const float* dout,
                           const float* qkv, const float* att, const float* lse, const float* out32,
                           const uint16_t* out16, float* delta, m::AttnShape sh) {
  const int64_t rows = int64_t(sh.B) * sh.NH * sh.T;
  launch(
      s, "attention_backward (delta)", rows,
      [=] __device__(int64_t r) {
        m::attention_delta_row<HS>(r, delta, dout, qkv, att, lse, out32, out16, sh);
      },
      kRowThreads);
  launch(
      s, "attention_backward (dq)", rows,
      [=] __device__(int64_t r) {
        m::attention_dq_row<HS>(r, d32, d16, dout, qkv, att, lse, delta, sh);
      },
      kRowThreads);
  launch(
      s, "attention_backward (dk, dv)", rows,
      [=] __device__(int64_t r) {
        m::attention_dkv_row<HS>(r, d32, d16, dout, qkv, att, lse, delta, sh);
      },
      kRowThreads);
}
}  // namespace

// The head size as a compile-time constant where it is 32, 64 or 128 (GPT-2 has 64), so the
// row accumulators live in registers; otherwise taken from the shape (HS = 0).
void DeviceKernels::attention_forward(cudaStream_t s, float* o32, uint16_t* o16, float* lse,
                                      float* att, const float* qkv, int B, int T, int C, int NH) {
  const m::AttnShape sh{B, T, C, NH};
  switch (C / NH) {
    case 32:
      return attention_forward_hs<32>(s, o32, o16, lse, att, qkv, sh);
    case 64:
      return attention_forward_hs<64>(s, o32, o16, lse, att, qkv, sh);
    case 128:
      return attention_forward_hs<128>(s, o32, o16, lse, att, qkv, sh);
    default:
      return attention_forward_hs<0>(s, o32, o16, lse, att, qkv, sh);
  }
}
void DeviceKernels::attention_backward(cudaStream_t s, float* d32, uint16_t* d16, const float* dout,
                                       const float* qkv, const float* att, const float* lse,
                                       const float* out32, const uint16_t* out16, float* delta,
                                       int B, int T, int C, int NH) {
  const m::AttnShape sh{B, T, C, NH};
  switch (C / NH) {
    case 32:
      return attention_backward_hs<32>(s, d32, d16, dout, qkv, att, lse, out32, out16, delta, sh);
    case 64:
      return attention_backward_hs<64>(s, d32, d16, dout, qkv, att, lse, out32, out16, delta, sh);
    case 128:
      return attention_backward_hs<128>(s, d32, d16, dout, qkv, att, lse, out32, out16, delta, sh);
    default:
      return attention_backward_hs<0>(s, d32, d16, dout, qkv, att, lse, out32, out16, delta, sh);
  }
}

}  // namespace gt::cuda_kernels
