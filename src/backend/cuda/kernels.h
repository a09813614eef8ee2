// backend/cuda/kernels.h: the launches of the CUDA backend's own kernels (kernels.cu). Each
// runs the per-element or per-row function of kernel_math.h over its index space on `stream`,
// asynchronously; pointers are device memory; (p32, p16) pairs are f32-or-bf16 tensors with
// exactly one non-null. Errors: gt::Error with the CUDA error's name when a launch fails.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace gt::cuda_kernels {

/// One tensor of adamw_multi: elements [begin, end) of p, g, m, v, and its 1 - lr*wd.
struct AdamChunk {
  float* p;
  const float* g;
  float* m;
  float* v;
  int64_t begin, end;
  float decay;
};

void round16(cudaStream_t s, uint16_t* out, const float* x, int64_t n, bool bf16);
void round_bf16_stochastic(cudaStream_t s, uint16_t* out, const float* x, int64_t n, uint64_t key);

void embedding_forward(cudaStream_t s, float* out, const int32_t* inp, const float* wte,
                       const float* wpe, int B, int T, int C);
/// tokens (U distinct), off (U+1), pos (B*T): positions of each token in increasing order.
void embedding_backward(cudaStream_t s, float* dwte, float* dwpe, const float* dout,
                        const int32_t* tokens, const int32_t* off, const int32_t* pos, int U, int B,
                        int T, int C);

void layernorm_forward(cudaStream_t s, float* o32, uint16_t* o16, float* mean, float* rstd,
                       const float* inp, const float* w, const float* b, int64_t N, int C);
void residual_layernorm_forward(cudaStream_t s, float* res, float* o32, uint16_t* o16, float* mean,
                                float* rstd, const float* a, const float* b, const float* w,
                                const float* bias, int64_t N, int C);
/// partial: scratch of layernorm_partial_floats(N, C) floats.
void layernorm_backward(cudaStream_t s, float* dinp, float* dw, float* db, const float* dout,
                        const float* inp, const float* w, const float* mean, const float* rstd,
                        int64_t N, int C, float* partial);
int64_t layernorm_partial_floats(int64_t N, int C);
/// out(C) += column sums of x (N,C) (f32 or bf16); partial: column_partial_floats(N, C).
void column_sums(cudaStream_t s, float* out, const float* x32, const uint16_t* x16, int64_t N,
                 int C, float* partial);
int64_t column_partial_floats(int64_t N, int C);

void gelu_forward(cudaStream_t s, float* o32, uint16_t* o16, const float* inp, int64_t n);
void gelu_backward(cudaStream_t s, float* d32, uint16_t* d16, const float* inp, const float* dout,
                   int64_t n);
void gelu_forward_fused(cudaStream_t s, float* o32, uint16_t* o16, float* g32, uint16_t* g16,
                        const float* inp, int64_t n);
void bias_gelu(cudaStream_t s, float* o32, uint16_t* o16, const float* prod, const float* bias,
               int64_t N, int OC);
void mul(cudaStream_t s, float* o32, uint16_t* o16, const float* prod, const float* g32,
         const uint16_t* g16, int64_t n);
void residual(cudaStream_t s, float* out, const float* a, const float* b, int64_t n);
void scale(cudaStream_t s, float* g, float f, int64_t n);

void softmax_ce_forward(cudaStream_t s, float* probs, float* losses, const float* logits,
                        const int32_t* targets, int64_t N, int V);
void softmax_ce_backward(cudaStream_t s, float* dlogits, const float* probs, const int32_t* targets,
                         float dloss, int64_t N, int V);
void softmax_ce_fused(cudaStream_t s, float* logits, float* losses, const int32_t* targets,
                      float dloss, int64_t N, int V);

void adamw(cudaStream_t s, float* p, const float* g, float* m, float* v, int64_t n, float grad_mult,
           float lr, float beta1, float beta2, float eps, float decay, float bc1, float bc2_sqrt);
/// chunks: device array of `count` AdamChunk (one block each).
void adamw_multi(cudaStream_t s, const AdamChunk* chunks, int64_t count, float grad_mult, float lr,
                 float beta1, float beta2, float eps, float bc1, float bc2_sqrt);
/// partial (K doubles) = sum_squares_partial over k < K.
void sum_squares_partial(cudaStream_t s, double* partial, const float* g, int64_t n, int64_t K);

/// Attention forward: out (f32/bf16), lse (may be null), att (may be null).
void attention_forward(cudaStream_t s, float* o32, uint16_t* o16, float* lse, float* att,
                       const float* qkv, int B, int T, int C, int NH);
/// Attention backward into dqkv (f32/bf16): probabilities from att, or from lse; the row sums
/// from out when (out32, out16) is given. delta: scratch of B*NH*T floats.
void attention_backward(cudaStream_t s, float* d32, uint16_t* d16, const float* dout,
                        const float* qkv, const float* att, const float* lse, const float* out32,
                        const uint16_t* out16, float* delta, int B, int T, int C, int NH);

}  // namespace gt::cuda_kernels
