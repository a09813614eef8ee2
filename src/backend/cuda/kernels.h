// backend/cuda/kernels.h: the CUDA backend's own kernels, as two classes with the same static
// functions, both from one source (kernels.cu): DeviceKernels launches each on the GPU;
// HostKernels launches the same kernels on the SIMT runtime (backend/simt), for the emulated
// backend (train.device = cuda-emu) that runs the CUDA backend's code, kernels and all, on any
// machine. Asynchronous on `s`; pointers are device memory;
// (p32, p16) pairs are f32-or-bf16 tensors with exactly one non-null. Errors: gt::Error with
// the CUDA error's name when a launch fails.
#pragma once
#include <cstdint>

struct CUstream_st;  // CUDA's stream (cudaStream_t is CUstream_st*)
namespace gt::simt {
class Stream;  // the SIMT runtime's (backend/simt/simt_host.h)
}

namespace gt::cuda_kernels {

/// One tensor of adamw_multi: elements [begin, end) of p, g, m, v, and its weight decay.
struct AdamChunk {
  float* p;
  const float* g;
  float* m;
  float* v;
  int64_t begin, end;
  float wd;
};

#define GT_CUDA_KERNEL_FUNCTIONS                                                                   \
  static void round16(Stream s, uint16_t* out, const float* x, int64_t n, bool bf16);              \
  /* out (f32) = x (bf16, or fp16 when !bf16), exactly. */                                         \
  static void widen16(Stream s, float* out, const uint16_t* x, int64_t n, bool bf16);              \
  static void round_bf16_stochastic(Stream s, uint16_t* out, const float* x, int64_t n,            \
                                    uint64_t key);                                                 \
  static void embedding_forward(Stream s, float* out, const int32_t* inp, const float* wte,        \
                                const float* wpe, int B, int T, int C);                            \
  /* tokens (U distinct), off (U+1), pos (B*T): positions of each token in increasing order. */    \
  static void embedding_backward(Stream s, float* dwte, float* dwpe, const float* dout,            \
                                 const int32_t* tokens, const int32_t* off, const int32_t* pos,    \
                                 int U, int B, int T, int C);                                      \
  static void layernorm_forward(Stream s, float* o32, uint16_t* o16, float* mean, float* rstd,     \
                                const float* inp, const float* w, const float* b, int64_t N,       \
                                int C);                                                            \
  static void residual_layernorm_forward(Stream s, float* res, float* o32, uint16_t* o16,          \
                                         float* mean, float* rstd, const float* a, const float* b, \
                                         const float* w, const float* bias, int64_t N, int C);     \
  /* partial: scratch of layernorm_partial_floats(N, C) floats. */                                 \
  static void layernorm_backward(Stream s, float* dinp, float* dw, float* db, const float* dout,   \
                                 const float* inp, const float* w, const float* mean,              \
                                 const float* rstd, int64_t N, int C, float* partial);             \
  static int64_t layernorm_partial_floats(int64_t N, int C);                                       \
  /* out(C) += column sums of x (N,C) (f32 or bf16); partial: column_partial_floats(N, C). */      \
  static void column_sums(Stream s, float* out, const float* x32, const uint16_t* x16, int64_t N,  \
                          int C, float* partial);                                                  \
  static int64_t column_partial_floats(int64_t N, int C);                                          \
  static void gelu_forward(Stream s, float* o32, uint16_t* o16, const float* inp, int64_t n);      \
  static void gelu_backward(Stream s, float* d32, uint16_t* d16, const float* inp,                 \
                            const float* dout, int64_t n);                                         \
  static void gelu_forward_fused(Stream s, float* o32, uint16_t* o16, float* g32, uint16_t* g16,   \
                                 const float* inp, int64_t n);                                     \
  /* out = gelu(prod + bias); pre (p32/p16, may be null) = prod + bias (the GELU's input) */       \
  static void bias_gelu(Stream s, float* o32, uint16_t* o16, float* p32, uint16_t* p16,            \
                        const float* prod, const float* bias, int64_t N, int OC);                  \
  /* out = prod * g (g: gelu' saved), or prod * gelu'(g) (g: the GELU's input, from_input) */      \
  static void mul(Stream s, float* o32, uint16_t* o16, const float* prod, const float* g32,        \
                  const uint16_t* g16, int64_t n, bool from_input);                                \
  static void residual(Stream s, float* out, const float* a, const float* b, int64_t n);           \
  static void scale(Stream s, float* g32, uint16_t* g16, float f, int64_t n);                      \
  static void softmax_ce_forward(Stream s, float* probs, float* losses, const float* logits,       \
                                 const int32_t* targets, int64_t N, int V);                        \
  static void softmax_ce_backward(Stream s, float* dlogits, const float* probs,                    \
                                  const int32_t* targets, float dloss, int64_t N, int V);          \
  /* logits (l32 f32 or l16 bf16) overwritten in place by their gradient. */                       \
  static void softmax_ce_fused(Stream s, float* l32, uint16_t* l16, float* losses,                 \
                               const int32_t* targets, float dloss, int64_t N, int V);             \
  static void adamw(Stream s, float* p, const float* g, float* m, float* v, int64_t n,             \
                    float grad_mult, float lr, float beta1, float beta2, float eps, float decay,   \
                    float bc1, float bc2_sqrt);                                                    \
  /* chunks: device array of `count` AdamChunk (one block each); the gradients times grad_mult, */ \
  /* or with norm_sq (device) times gt::adam_grad_mult(*norm_sq, loss_scale, clip), and */         \
  /* nothing changes when *norm_sq is not finite; flag (device, may be null) becomes 1 when an */  \
  /* updated weight or moment is inf or NaN. */                                                    \
  static void adamw_multi(Stream s, const AdamChunk* chunks, int64_t count, float grad_mult,       \
                          const double* norm_sq, double loss_scale, double clip, float lr,         \
                          float beta1, float beta2, float eps, float bc1, float bc2_sqrt,          \
                          int* flag);                                                              \
  /* out[0] (device) = sum of squares of g in double, in a fixed order; partial: */                \
  /* configs::kNormBlocks doubles of scratch. */                                                   \
  static void sum_squares(Stream s, double* out, const float* g, int64_t n, double* partial);      \
  /* Attention forward: out (f32/bf16), lse (may be null), att (may be null); flash: 1 or 2 */     \
  /* for the flash form with bf16 or fp16 operands where it applies (lse given, att null), 0 */    \
  /* for the CUDA-core form. */                                                                    \
  /* qkv: f32 (qkv) or, read by the flash form alone (flash_reads_qkv16) with a bf16 output, */    \
  /* bf16 (qkv16). */                                                                              \
  static void attention_forward(Stream s, float* o32, uint16_t* o16, float* lse, float* att,       \
                                const float* qkv, const uint16_t* qkv16, int B, int T, int C,      \
                                int NH, int flash);                                                \
  /* Whether the flash form (flash: as attention_forward's) reads this bf16 qkv in place: head */  \
  /* size 32, 64 or 128, C a multiple of 8, qkv16 16-byte aligned, bf16. */                        \
  static bool flash_reads_qkv16(int C, int NH, const uint16_t* qkv16, int flash);                  \
  /* Attention backward into dqkv (f32/bf16): probabilities from att, or from lse; the row sums */ \
  /* from out when (out32, out16) is given. delta: scratch of B*NH*T floats. */                    \
  static void attention_backward(Stream s, float* d32, uint16_t* d16, const float* dout,           \
                                 const float* qkv, const uint16_t* qkv16, const float* att,        \
                                 const float* lse, const float* out32, const uint16_t* out16,      \
                                 float* delta, int B, int T, int C, int NH, int flash);            \
  /* fp8 copy of x (rows, cols), or of its transpose, scaled by the delayed scaling of state */    \
  /* (kFp8StateFloats floats), whose amax history then takes x's amax; first_use: the state is */  \
  /* new (its scale is then x's own amax's). */                                                    \
  static void bias_add(Stream s, float* out, const float* bias, int64_t N, int OC);                \
  static void fp8_quantize(Stream s, uint8_t* out, const float* x, int64_t rows, int64_t cols,     \
                           bool transpose, bool e5m2, float* state, bool first_use);               \
  /* fp8_quantize into both layouts at one read of x: out (rows, cols) and out_t (cols, rows), */  \
  /* one scale, one amax. */                                                                       \
  static void fp8_quantize_both(Stream s, uint8_t* out, uint8_t* out_t, const float* x,            \
                                int64_t rows, int64_t cols, bool e5m2, float* state,               \
                                bool first_use);                                                   \
  static_assert(true, "")

/// The kernels on the GPU (kernels.cu compiled by nvcc).
struct DeviceKernels {
  using Stream = CUstream_st*;
  GT_CUDA_KERNEL_FUNCTIONS;
};
/// The same kernel source on the SIMT runtime (kernels.cu compiled by the host compiler, in
/// kernels_emu.cpp): every launch runs its grid thread by thread on the CPU.
struct HostKernels {
  using Stream = simt::Stream*;
  GT_CUDA_KERNEL_FUNCTIONS;
};

}  // namespace gt::cuda_kernels
