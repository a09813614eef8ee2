// backend/cuda/kernels_host.cpp: HostKernels, the CUDA backend's kernels run on the CPU: the
// same kernel_math.h function over the same index space as kernels.cu's launches, OpenMP over
// the indices (each index is independent, so the result does not depend on the threads).
#include <cstdint>

#include "backend/cuda/kernel_math.h"
#include "backend/cuda/kernels.h"

namespace gt::cuda_kernels {
namespace {
namespace m = gt::cuda_math;
using m::kColumnRows;

template <typename F>
void for_each(int64_t n, F f) {
#pragma omp parallel for schedule(static) if (n > 4096)
  for (int64_t i = 0; i < n; ++i) f(i);
}
}  // namespace

void HostKernels::round16(cudaStream_t, uint16_t* out, const float* x, int64_t n, bool bf16) {
  for_each(n, [=](int64_t i) { m::round16_elem(i, out, x, bf16); });
}
void HostKernels::round_bf16_stochastic(cudaStream_t, uint16_t* out, const float* x, int64_t n,
                                        uint64_t key) {
  for_each(n, [=](int64_t i) { m::round_bf16_stochastic_elem(i, out, x, key); });
}
void HostKernels::embedding_forward(cudaStream_t, float* out, const int32_t* inp, const float* wte,
                                    const float* wpe, int B, int T, int C) {
  for_each(int64_t(B) * T * C,
           [=](int64_t i) { m::embedding_forward_elem(i, out, inp, wte, wpe, T, C); });
}
void HostKernels::embedding_backward(cudaStream_t, float* dwte, float* dwpe, const float* dout,
                                     const int32_t* tokens, const int32_t* off, const int32_t* pos,
                                     int U, int B, int T, int C) {
  for_each(int64_t(U) * C,
           [=](int64_t i) { m::embedding_backward_wte_elem(i, dwte, dout, tokens, off, pos, C); });
  for_each(int64_t(T) * C,
           [=](int64_t i) { m::embedding_backward_wpe_elem(i, dwpe, dout, B, T, C); });
}
void HostKernels::layernorm_forward(cudaStream_t, float* o32, uint16_t* o16, float* mean,
                                    float* rstd, const float* inp, const float* w, const float* b,
                                    int64_t N, int C) {
  for_each(N, [=](int64_t i) { m::layernorm_forward_row(i, o32, o16, mean, rstd, inp, w, b, C); });
}
void HostKernels::residual_layernorm_forward(cudaStream_t, float* res, float* o32, uint16_t* o16,
                                             float* mean, float* rstd, const float* a,
                                             const float* b, const float* w, const float* bias,
                                             int64_t N, int C) {
  for_each(N, [=](int64_t i) {
    m::residual_layernorm_row(i, res, o32, o16, mean, rstd, a, b, w, bias, C);
  });
}
int64_t HostKernels::layernorm_partial_floats(int64_t N, int C) {
  return (N + kColumnRows - 1) / kColumnRows * 2 * C;
}
void HostKernels::layernorm_backward(cudaStream_t, float* dinp, float* dw, float* db,
                                     const float* dout, const float* inp, const float* w,
                                     const float* mean, const float* rstd, int64_t N, int C,
                                     float* partial) {
  for_each(N, [=](int64_t i) { m::layernorm_backward_row(i, dinp, dout, inp, w, mean, rstd, C); });
  const int64_t K = (N + kColumnRows - 1) / kColumnRows;
  for_each(K * C, [=](int64_t j) {
    m::layernorm_params_partial(j, partial, dout, inp, mean, rstd, N, C, kColumnRows);
  });
  for_each(C, [=](int64_t c) { m::column_finish(c, dw, partial, K, 2 * C); });
  for_each(C, [=](int64_t c) { m::column_finish(c, db, partial + C, K, 2 * C); });
}
int64_t HostKernels::column_partial_floats(int64_t N, int C) {
  return (N + kColumnRows - 1) / kColumnRows * C;
}
void HostKernels::column_sums(cudaStream_t, float* out, const float* x32, const uint16_t* x16,
                              int64_t N, int C, float* partial) {
  const int64_t K = (N + kColumnRows - 1) / kColumnRows;
  for_each(K * C, [=](int64_t j) { m::column_partial(j, partial, x32, x16, N, C, kColumnRows); });
  for_each(C, [=](int64_t c) { m::column_finish(c, out, partial, K, C); });
}
void HostKernels::gelu_forward(cudaStream_t, float* o32, uint16_t* o16, const float* inp,
                               int64_t n) {
  for_each(n, [=](int64_t i) { m::gelu_forward_elem(i, o32, o16, inp); });
}
void HostKernels::gelu_backward(cudaStream_t, float* d32, uint16_t* d16, const float* inp,
                                const float* dout, int64_t n) {
  for_each(n, [=](int64_t i) { m::gelu_backward_elem(i, d32, d16, inp, dout); });
}
void HostKernels::gelu_forward_fused(cudaStream_t, float* o32, uint16_t* o16, float* g32,
                                     uint16_t* g16, const float* inp, int64_t n) {
  for_each(n, [=](int64_t i) { m::gelu_forward_fused_elem(i, o32, o16, g32, g16, inp); });
}
void HostKernels::bias_gelu(cudaStream_t, float* o32, uint16_t* o16, const float* prod,
                            const float* bias, int64_t N, int OC) {
  for_each(N * OC, [=](int64_t i) { m::bias_gelu_elem(i, o32, o16, prod, bias, OC); });
}
void HostKernels::mul(cudaStream_t, float* o32, uint16_t* o16, const float* prod, const float* g32,
                      const uint16_t* g16, int64_t n) {
  for_each(n, [=](int64_t i) { m::mul_elem(i, o32, o16, prod, g32, g16); });
}
void HostKernels::residual(cudaStream_t, float* out, const float* a, const float* b, int64_t n) {
  for_each(n, [=](int64_t i) { m::residual_elem(i, out, a, b); });
}
void HostKernels::scale(cudaStream_t, float* g, float f, int64_t n) {
  for_each(n, [=](int64_t i) { m::scale_elem(i, g, f); });
}
void HostKernels::softmax_ce_forward(cudaStream_t, float* probs, float* losses, const float* logits,
                                     const int32_t* targets, int64_t N, int V) {
  for_each(N, [=](int64_t i) { m::softmax_ce_forward_row(i, probs, losses, logits, targets, V); });
}
void HostKernels::softmax_ce_backward(cudaStream_t, float* dlogits, const float* probs,
                                      const int32_t* targets, float dloss, int64_t N, int V) {
  for_each(N * V,
           [=](int64_t i) { m::softmax_ce_backward_elem(i, dlogits, probs, targets, dloss, V); });
}
void HostKernels::softmax_ce_fused(cudaStream_t, float* logits, float* losses,
                                   const int32_t* targets, float dloss, int64_t N, int V) {
  for_each(N, [=](int64_t i) { m::softmax_ce_fused_row(i, logits, losses, targets, dloss, V); });
}
void HostKernels::adamw(cudaStream_t, float* p, const float* g, float* mm, float* v, int64_t n,
                        float grad_mult, float lr, float beta1, float beta2, float eps, float decay,
                        float bc1, float bc2_sqrt) {
  for_each(n, [=](int64_t j) {
    m::adamw_elem(j, p, g, mm, v, grad_mult, lr, beta1, beta2, eps, decay, bc1, bc2_sqrt);
  });
}
void HostKernels::adamw_multi(cudaStream_t, const AdamChunk* chunks, int64_t count, float grad_mult,
                              float lr, float beta1, float beta2, float eps, float bc1,
                              float bc2_sqrt) {
  for_each(count, [=](int64_t b) {  // one block per chunk, as the GPU
    const AdamChunk c = chunks[b];
    for (int64_t j = c.begin; j < c.end; ++j)
      m::adamw_elem(j, c.p, c.g, c.m, c.v, grad_mult, lr, beta1, beta2, eps, c.decay, bc1,
                    bc2_sqrt);
  });
}
void HostKernels::sum_squares_partial(cudaStream_t, double* partial, const float* g, int64_t n,
                                      int64_t K) {
  for_each(K, [=](int64_t k) { m::sum_squares_partial(k, partial, g, n, K); });
}
void HostKernels::bias_add(cudaStream_t, float* out, const float* bias, int64_t N, int OC) {
  for_each(N * OC, [=](int64_t i) { m::bias_add_elem(i, out, bias, OC); });
}
void HostKernels::fp8_quantize(cudaStream_t, uint8_t* out, const float* x, int64_t rows,
                               int64_t cols, bool transpose, bool e5m2, float* state,
                               float* partial) {
  const int64_t n = rows * cols, K = kFp8AmaxParts;
  for_each(K, [=](int64_t k) { m::amax_partial(k, partial, x, n, K); });
  m::fp8_scale_step(state, partial, K, e5m2 ? m::kE5m2Max : m::kE4m3Max);
  for_each(n,
           [=](int64_t i) { m::fp8_quantize_elem(i, out, x, state, rows, cols, transpose, e5m2); });
}
void HostKernels::attention_forward(cudaStream_t, float* o32, uint16_t* o16, float* lse, float* att,
                                    const float* qkv, int B, int T, int C, int NH) {
  const m::AttnShape sh{B, T, C, NH};
  for_each(int64_t(B) * NH * T,
           [=](int64_t r) { m::attention_forward_row(r, o32, o16, lse, att, qkv, sh); });
}
void HostKernels::attention_backward(cudaStream_t, float* d32, uint16_t* d16, const float* dout,
                                     const float* qkv, const float* att, const float* lse,
                                     const float* out32, const uint16_t* out16, float* delta, int B,
                                     int T, int C, int NH) {
  const m::AttnShape sh{B, T, C, NH};
  const int64_t rows = int64_t(B) * NH * T;
  for_each(rows, [=](int64_t r) {
    m::attention_delta_row(r, delta, dout, qkv, att, lse, out32, out16, sh);
  });
  for_each(rows,
           [=](int64_t r) { m::attention_dq_row(r, d32, d16, dout, qkv, att, lse, delta, sh); });
  for_each(rows,
           [=](int64_t r) { m::attention_dkv_row(r, d32, d16, dout, qkv, att, lse, delta, sh); });
}

}  // namespace gt::cuda_kernels
