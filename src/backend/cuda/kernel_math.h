// backend/cuda/kernel_math.h: the arithmetic of every CUDA kernel, one output element or one
// row per call, in functions that nvcc compiles for the GPU and the C++ compiler compiles for
// the host. The CUDA files (kernels.cu) add only the index computation and the launch; the
// host test (tests/backend/cuda_host_math_test.cpp) runs these same functions over the same
// index space on the CPU and compares them with the reference backend, so the math of the
// CUDA backend is tested on every machine, with or without a GPU.
//
// Conventions as backend.h (row-major; B batch, T time, C channels, NH heads, V vocabulary,
// N = B*T rows). A tensor argument that may be f32 or bf16 is passed as a pair (p32, p16):
// exactly one is non-null. Sums that decide accuracy run in a fixed order (deterministic: the
// same result in every run and for every launch configuration).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/adam_math.h"
#include "backend/host_device.h"

namespace gt::cuda_math {

/// Largest attention head size (C/NH) the own attention kernels take: each thread keeps one
/// row of q, k or v and its accumulators in registers/local memory. GPT-2 (all sizes) has 64.
constexpr int kMaxHeadSize = 128;
/// Rows per partial sum of the column sums (LayerNorm's dw/db, the bias gradient): the first
/// stage sums this many rows per column, the second the partials in order.
constexpr int64_t kColumnRows = 256;
/// LayerNorm epsilon, torch.nn.LayerNorm's default.
constexpr float kLnEps = 1e-5f;

GT_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
GT_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

/// float -> bfloat16, round to nearest even; NaN stays NaN (quiet). As the CPU backend's.
GT_HD uint16_t to_bf16(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? uint16_t((u >> 16) | 0x40u) : uint16_t(r);
}
/// bfloat16 -> float (exact).
GT_HD float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

/// float -> IEEE 754 binary16, round to nearest even, with subnormals; overflow (|x| >=
/// 65520) gives infinity, NaN stays NaN. Bit for bit the hardware conversion (__float2half_rn,
/// x86 vcvtps2ph), written out so that host and device agree by construction.
GT_HD uint16_t to_f16(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) return uint16_t(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0u));
  if (ax >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // rounds to 65536: infinity
  if (ax <= 0x33000000u) return uint16_t(sign);            // <= 2^-25: rounds to zero
  const uint32_t e = ax >> 23;
  if (e < 113) {  // a half subnormal: units of 2^-24
    const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = ((e - 112u) << 10) | ((ax >> 13) & 0x3FFu);
  const uint32_t rem = ax & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return uint16_t(sign | r);
}

/// IEEE binary16 -> float (exact).
GT_HD float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return bits_float(sign | 0x7F800000u | (m << 13));              // inf, NaN
  if (e == 0) return (sign ? -1.0f : 1.0f) * float(m) * 5.9604644775390625e-8f;  // m * 2^-24
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

/// SplitMix64 (Steele, Lea & Flood 2014), the counter-based hash of stochastic rounding; the
/// CPU backend's (cpu/fast_math.h), so both round the same elements the same way.
GT_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/// float -> bfloat16 with stochastic rounding (Gupta et al. 2015): adds 16 random bits below
/// the kept ones; infinities and NaN round as to_bf16.
GT_HD uint16_t to_bf16_stochastic(float f, uint32_t bits) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7F800000u) == 0x7F800000u) return to_bf16(f);
  return uint16_t((u + (bits & 0xFFFFu)) >> 16);
}

/// Element i of an f32-or-bf16 tensor.
GT_HD float load(const float* p32, const uint16_t* p16, int64_t i) {
  return p32 ? p32[i] : bf16_to_float(p16[i]);
}
/// Stores v at element i of an f32-or-bf16 tensor (bf16: rounded to nearest even).
GT_HD void store(float* p32, uint16_t* p16, int64_t i, float v) {
  if (p32)
    p32[i] = v;
  else
    p16[i] = to_bf16(v);
}

// ---- conversions ---------------------------------------------------------------------------
/// out16[i] = x[i] in 16 bits: bf16 (bf16 = true) or fp16, round to nearest even.
GT_HD void round16_elem(int64_t i, uint16_t* out16, const float* x, bool bf16) {
  out16[i] = bf16 ? to_bf16(x[i]) : to_f16(x[i]);
}
/// out16[i] = x[i] in bf16 with stochastic rounding keyed by (key, i), as the CPU backend.
GT_HD void round_bf16_stochastic_elem(int64_t i, uint16_t* out16, const float* x, uint64_t key) {
  out16[i] = to_bf16_stochastic(x[i], static_cast<uint32_t>(splitmix64(key + uint64_t(i))));
}

// ---- embedding -----------------------------------------------------------------------------
/// out(B,T,C) element i = wte[inp[bt], c] + wpe[t, c].
GT_HD void embedding_forward_elem(int64_t i, float* out, const int32_t* inp, const float* wte,
                                  const float* wpe, int T, int C) {
  const int64_t bt = i / C, c = i % C, t = bt % T;
  out[i] = wte[int64_t(inp[bt]) * C + c] + wpe[t * C + c];
}
/// dwte row of distinct token u (of U), channel c (i = u*C + c): the positions of token
/// tokens[u] are pos[off[u] .. off[u+1]) in increasing order, and their gradients are added
/// in that order, one float at a time, as the reference does: deterministic, no atomics.
GT_HD void embedding_backward_wte_elem(int64_t i, float* dwte, const float* dout,
                                       const int32_t* tokens, const int32_t* off,
                                       const int32_t* pos, int C) {
  const int64_t u = i / C, c = i % C;
  float* g = dwte + int64_t(tokens[u]) * C + c;
  float acc = *g;
  for (int32_t k = off[u]; k < off[u + 1]; ++k) acc += dout[int64_t(pos[k]) * C + c];
  *g = acc;
}
/// dwpe(T,C) element i += the B gradients of position t, in order of b.
GT_HD void embedding_backward_wpe_elem(int64_t i, float* dwpe, const float* dout, int B, int T,
                                       int C) {
  const int64_t t = i / C, c = i % C;
  float acc = dwpe[i];
  for (int b = 0; b < B; ++b) acc += dout[(int64_t(b) * T + t) * C + c];
  dwpe[i] = acc;
}

// ---- LayerNorm -----------------------------------------------------------------------------
/// Row i of LayerNorm (two passes in f32 over the row): out (f32 or bf16), mean[i], rstd[i].
GT_HD void layernorm_forward_row(int64_t i, float* out32, uint16_t* out16, float* mean, float* rstd,
                                 const float* inp, const float* w, const float* b, int C) {
  const float* x = inp + i * C;
  float m = 0.f;
  for (int c = 0; c < C; ++c) m += x[c];
  m /= C;
  float v = 0.f;
  for (int c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
  v /= C;
  const float s = 1.0f / sqrtf(v + kLnEps);
  for (int c = 0; c < C; ++c) store(out32, out16, i * C + c, (x[c] - m) * s * w[c] + b[c]);
  mean[i] = m;
  rstd[i] = s;
}
/// Row i of the fused residual + LayerNorm: res = a + b, then layernorm_forward_row of res.
GT_HD void residual_layernorm_row(int64_t i, float* res, float* out32, uint16_t* out16, float* mean,
                                  float* rstd, const float* a, const float* b, const float* w,
                                  const float* bias, int C) {
  for (int c = 0; c < C; ++c) res[i * C + c] = a[i * C + c] + b[i * C + c];
  layernorm_forward_row(i, out32, out16, mean, rstd, res, w, bias, C);
}
/// Row i of LayerNorm's input gradient: dinp(N,C) += ((w dout) - mean(w dout) - norm *
/// mean(w dout norm)) * rstd.
GT_HD void layernorm_backward_row(int64_t i, float* dinp, const float* dout, const float* inp,
                                  const float* w, const float* mean, const float* rstd, int C) {
  const float* d = dout + i * C;
  const float* x = inp + i * C;
  const float m = mean[i], s = rstd[i];
  float dnorm_mean = 0.f, dnorm_norm_mean = 0.f;
  for (int c = 0; c < C; ++c) {
    const float dn = w[c] * d[c];
    dnorm_mean += dn;
    dnorm_norm_mean += dn * (x[c] - m) * s;
  }
  dnorm_mean /= C;
  dnorm_norm_mean /= C;
  for (int c = 0; c < C; ++c) {
    const float norm = (x[c] - m) * s;
    dinp[i * C + c] += (w[c] * d[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
  }
}
/// Partial sums of LayerNorm's weight and bias gradients over rows [k*R, min(N,(k+1)*R)) for
/// channel c (j = k*C + c): partial[k*2C + c] = sum norm*dout, partial[k*2C + C + c] = sum dout.
GT_HD void layernorm_params_partial(int64_t j, float* partial, const float* dout, const float* inp,
                                    const float* mean, const float* rstd, int64_t N, int C,
                                    int64_t R) {
  const int64_t k = j / C, c = j % C;
  float sw = 0.f, sb = 0.f;
  const int64_t end = (k + 1) * R < N ? (k + 1) * R : N;
  for (int64_t r = k * R; r < end; ++r) {
    const float d = dout[r * C + c];
    sw += (inp[r * C + c] - mean[r]) * rstd[r] * d;
    sb += d;
  }
  partial[k * 2 * C + c] = sw;
  partial[k * 2 * C + C + c] = sb;
}

/// Partial column sums of an (N,C) f32-or-bf16 matrix over rows [k*R, min(N,(k+1)*R)), for
/// column c (j = k*C + c), into partial[k*C + c] (the bias gradient's first stage).
GT_HD void column_partial(int64_t j, float* partial, const float* x32, const uint16_t* x16,
                          int64_t N, int C, int64_t R) {
  const int64_t k = j / C, c = j % C;
  float s = 0.f;
  const int64_t end = (k + 1) * R < N ? (k + 1) * R : N;
  for (int64_t r = k * R; r < end; ++r) s += load(x32, x16, r * C + c);
  partial[k * C + c] = s;
}
/// out[c] += sum over k < K of partial[k*stride + c], in order of k (the second stage).
GT_HD void column_finish(int64_t c, float* out, const float* partial, int64_t K, int64_t stride) {
  float s = 0.f;
  for (int64_t k = 0; k < K; ++k) s += partial[k * stride + c];
  out[c] += s;
}

// ---- GELU and residual ---------------------------------------------------------------------
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
/// gelu(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016).
GT_HD float gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}
/// d gelu / dx.
GT_HD float gelu_grad(float x) {
  const float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
}
GT_HD void gelu_forward_elem(int64_t i, float* out32, uint16_t* out16, const float* inp) {
  store(out32, out16, i, gelu(inp[i]));
}
/// dinp = gelu'(inp) * dout (an f32 dinp may alias dout: element i is read before written).
GT_HD void gelu_backward_elem(int64_t i, float* d32, uint16_t* d16, const float* inp,
                              const float* dout) {
  store(d32, d16, i, gelu_grad(inp[i]) * dout[i]);
}
/// out = gelu(inp), and dgelu = gelu'(inp) when (g32, g16) is not (null, null).
GT_HD void gelu_forward_fused_elem(int64_t i, float* out32, uint16_t* out16, float* g32,
                                   uint16_t* g16, const float* inp) {
  const float x = inp[i];
  store(out32, out16, i, gelu(x));
  if (g32 || g16) store(g32, g16, i, gelu_grad(x));
}
/// Bias and GELU applied to a product (the epilogue, when cuBLASLt has none for the types):
/// out[i] = gelu(x), x = prod[i] + bias[i % OC] (bias may be null); pre[i] = x when (p32, p16)
/// is not (null, null) (cuBLASLt's GELU_AUX_BIAS: the GELU's input, for the backward).
GT_HD void bias_gelu_elem(int64_t i, float* out32, uint16_t* out16, float* p32, uint16_t* p16,
                          const float* prod, const float* bias, int OC) {
  const float x = prod[i] + (bias ? bias[i % OC] : 0.f);
  store(out32, out16, i, gelu(x));
  if (p32 || p16) store(p32, p16, i, x);
}
/// out(N,OC) element i += bias[i % OC] (the bias of a product that had no epilogue).
GT_HD void bias_add_elem(int64_t i, float* out, const float* bias, int OC) {
  out[i] += bias[i % OC];
}
/// out[i] = prod[i] * dgelu[i]: the GELU backward applied to the dinp product.
GT_HD void mul_elem(int64_t i, float* out32, uint16_t* out16, const float* prod, const float* g32,
                    const uint16_t* g16) {
  store(out32, out16, i, prod[i] * load(g32, g16, i));
}
/// out[i] = prod[i] * gelu'(pre[i]): the GELU backward from its saved input (cuBLASLt's DGELU
/// epilogue, when it has none for the types).
GT_HD void mul_gelu_grad_elem(int64_t i, float* out32, uint16_t* out16, const float* prod,
                              const float* p32, const uint16_t* p16) {
  store(out32, out16, i, prod[i] * gelu_grad(load(p32, p16, i)));
}
GT_HD void residual_elem(int64_t i, float* out, const float* a, const float* b) {
  out[i] = a[i] + b[i];
}
GT_HD void scale_elem(int64_t i, float* g, float s) { g[i] *= s; }

// ---- softmax cross-entropy -----------------------------------------------------------------
/// Max and log-sum-exp of row l[0..V).
GT_HD float row_logsumexp(const float* l, int V) {
  float mx = -INFINITY;
  for (int j = 0; j < V; ++j) mx = l[j] > mx ? l[j] : mx;
  float z = 0.f;
  for (int j = 0; j < V; ++j) z += expf(l[j] - mx);
  return mx + logf(z);
}
/// Row i: probs(N,V) = softmax, losses[i] = lse - logit[target] (targets checked by the caller).
GT_HD void softmax_ce_forward_row(int64_t i, float* probs, float* losses, const float* logits,
                                  const int32_t* targets, int V) {
  const float* l = logits + i * V;
  const float lse = row_logsumexp(l, V);
  for (int j = 0; j < V; ++j) probs[i * V + j] = expf(l[j] - lse);
  losses[i] = lse - l[targets[i]];
}
/// Element i of dlogits(N,V) = (probs - onehot(target)) * dloss.
GT_HD void softmax_ce_backward_elem(int64_t i, float* dlogits, const float* probs,
                                    const int32_t* targets, float dloss, int V) {
  const int64_t r = i / V, j = i % V;
  dlogits[i] = (probs[i] - (j == targets[r] ? 1.0f : 0.0f)) * dloss;
}
/// Row i of the fused form: losses[i], and the row overwritten with (softmax - onehot) * dloss.
GT_HD void softmax_ce_fused_row(int64_t i, float* logits, float* losses, const int32_t* targets,
                                float dloss, int V) {
  float* l = logits + i * V;
  const float lse = row_logsumexp(l, V);
  const int32_t t = targets[i];
  losses[i] = lse - l[t];
  for (int j = 0; j < V; ++j) l[j] = (expf(l[j] - lse) - (j == t ? 1.0f : 0.0f)) * dloss;
}

// ---- optimizer -----------------------------------------------------------------------------
/// AdamW on element j (Loshchilov & Hutter 2019, as torch.optim.AdamW), the gradient times
/// grad_mult: bc1 = 1 - beta1^t, bc2_sqrt = sqrt(1 - beta2^t), decay = 1 - lr*wd.
GT_HD void adamw_elem(int64_t j, float* p, const float* g, float* m, float* v, float grad_mult,
                      float lr, float beta1, float beta2, float eps, float decay, float bc1,
                      float bc2_sqrt) {
  const float gi = g[j] * grad_mult;
  const float mi = beta1 * m[j] + (1.0f - beta1) * gi;
  const float vi = beta2 * v[j] + (1.0f - beta2) * gi * gi;
  m[j] = mi;
  v[j] = vi;
  p[j] = p[j] * decay - (lr / bc1) * mi / (sqrtf(vi) / bc2_sqrt + eps);
}
// The gradients' multiplier from their norm (the loss scale undone, the clip) is
// gt::adam_grad_mult (backend/adam_math.h), which the host's optimizer step shares.
/// Partial sum of squares, in double, of the elements g[k], g[k+K], g[k+2K], ... (< n) into
/// partial[k]: K is a constant of the caller (not the launch), so the order of the sums, and
/// the result, does not depend on the GPU or the launch; adjacent k read adjacent elements.
GT_HD void sum_squares_partial(int64_t k, double* partial, const float* g, int64_t n, int64_t K) {
  double s = 0.0;
  for (int64_t i = k; i < n; i += K) s += double(g[i]) * g[i];
  partial[k] = s;
}

// ---- fp8 (Micikevicius et al. 2022, "FP8 Formats for Deep Learning") ----------------------
// e4m3: 4 exponent bits (bias 7), 3 mantissa bits, largest 448, no infinity (S.1111.111 is
// NaN); e5m2: 5 exponent bits (bias 15), 2 mantissa bits, largest 57344, IEEE-like. Products
// take per-tensor scales from an amax history (delayed scaling, as NVIDIA's Transformer
// Engine): q = fp8(x * scale), scale = fp8_max / max(amax history).
constexpr float kE4m3Max = 448.0f;
constexpr float kE5m2Max = 57344.0f;
/// Length of the amax history of delayed scaling (Transformer Engine's default is 1024; short
/// here, so a scale follows a changing tensor within a few steps).
constexpr int kAmaxHistory = 16;
/// Floats of one tensor's scaling state: [history (kAmaxHistory)] [uses] [next scale]
/// [scale used] [amax of the current use] [1 / scale used] [3 unused] (1 / scale used is the
/// dequantization factor the product reads, 16-byte aligned as cuBLASLt's scale pointers
/// evidently must be: with it 4-byte aligned, cublasLtMatmul refused every fp8 product on an
/// H200, cuBLASLt 13.1, though its heuristic had found algorithms; the current amax is
/// gathered by the cast).
constexpr int kFp8StateFloats = kAmaxHistory + 8;
/// Where the state holds the amax of the tensor being cast.
constexpr int kFp8AmaxNow = kAmaxHistory + 3;
/// Where the state holds the dequantization factor (1 / scale used), 16 bytes from the start.
constexpr int kFp8Dequant = kAmaxHistory + 4;
static_assert(kFp8Dequant % 4 == 0, "the dequantization factor is 16-byte aligned");

/// fp8 code -> float (exact).
GT_HD float fp8_to_float(uint8_t v, bool e5m2) {
  const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const uint32_t sign = v >> 7, e = (v >> mbits) & (e5m2 ? 0x1Fu : 0xFu),
                 m = v & ((1u << mbits) - 1u);
  float r;
  if (e5m2 && e == 0x1F)
    r = m ? NAN : INFINITY;
  else if (!e5m2 && e == 0xF && m == 7)
    r = NAN;
  else if (e == 0)
    r = ldexpf(float(m), 1 - bias - mbits);
  else
    r = ldexpf(float((1u << mbits) | m), int(e) - bias - mbits);
  return sign ? -r : r;
}
/// float -> fp8, round to nearest even, saturating to the largest finite value (as cuBLASLt's
/// and Transformer Engine's "satfinite" casts); NaN stays NaN.
GT_HD uint8_t to_fp8(float x, bool e5m2) {
  const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const uint32_t u = float_bits(x);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint8_t(sign | (e5m2 ? 0x7Fu : 0x7Fu));  // NaN
  const float fmax = e5m2 ? kE5m2Max : kE4m3Max;
  const uint8_t maxcode = e5m2 ? 0x7B : 0x7E;
  float a = fabsf(x);
  if (a >= fmax) return uint8_t(sign | maxcode);  // saturate (infinity included)
  // the spacing of fp8 values around a: 2^(max(exp(a), 1 - bias) - mbits)
  int e;
  frexpf(a, &e);  // a = f * 2^e, f in [0.5, 1): a's exponent is e - 1
  int ue = e - 1 < 1 - bias ? 1 - bias : e - 1;
  const float q = ldexpf(1.0f, ue - mbits);
  float n = rintf(a / q);  // round half to even (the default rounding mode); exact quotient
  float r = n * q;
  if (r > fmax) r = fmax;
  // encode r (an fp8 value): exponent and mantissa
  if (r == 0.0f) return sign;
  int re;
  frexpf(r, &re);
  int be = re - 1 + bias;
  uint32_t code;
  if (be <= 0) {  // subnormal: r = m * 2^(1 - bias - mbits)
    code = uint32_t(ldexpf(r, bias - 1 + mbits));
  } else {
    const uint32_t m = uint32_t(ldexpf(r, mbits - (re - 1))) - (1u << mbits);
    code = (uint32_t(be) << mbits) | m;
  }
  return uint8_t(sign | code);
}

/// Partial amax over the elements x[k], x[k+K], ... (< n): the largest |x| (NaN ignored).
GT_HD void amax_partial(int64_t k, float* partial, const float* x, int64_t n, int64_t K) {
  float a = 0.f;
  for (int64_t i = k; i < n; i += K) a = fmaxf(a, fabsf(x[i]));
  partial[k] = a;
}
/// One use of a tensor's delayed scaling (one thread): amax = max of the K partials; the scale
/// used now is the one the history gave (the current amax's on the first use); then the amax
/// joins the history and the next scale is fmax / max(history) (1 when the history is all 0).
GT_HD void fp8_scale_step(float* state, const float* partial, int64_t K, float fmax) {
  float amax = 0.f;
  for (int64_t k = 0; k < K; ++k) amax = fmaxf(amax, partial[k]);
  float* hist = state;
  float& uses = state[kAmaxHistory];
  float& next = state[kAmaxHistory + 1];
  const float now = uses == 0.f ? (amax > 0.f ? fmax / amax : 1.0f) : next;
  state[kAmaxHistory + 2] = now;
  state[kFp8Dequant] = 1.0f / now;
  hist[int(uses) % kAmaxHistory] = amax;
  uses += 1.0f;
  float m = 0.f;
  for (int i = 0; i < kAmaxHistory; ++i) m = fmaxf(m, hist[i]);
  next = m > 0.f ? fmax / m : 1.0f;
}
/// Element i of the fp8 copy of x (rows, cols) scaled by state's scale used: out is x's layout,
/// or its transpose (cols, rows) when transpose.
GT_HD void fp8_quantize_elem(int64_t i, uint8_t* out, const float* x, const float* state,
                             int64_t rows, int64_t cols, bool transpose, bool e5m2) {
  const int64_t src = transpose ? (i % rows) * cols + i / rows : i;
  out[i] = to_fp8(x[src] * state[kAmaxHistory + 2], e5m2);
}

// ---- causal self-attention (own kernels; one query or key row per call) ---------------------
// qkv (B,T,3C): q at [0,C), k at [C,2C), v at [2C,3C) of a row; head h uses channels
// [h*hs, (h+1)*hs). Row index r = (b*NH + h)*T + t. Scale 1/sqrt(hs) (Vaswani et al. 2017).
// HS > 0: the head size as a compile-time constant (the kernels instantiate 32, 64 and 128,
// so the row accumulators live in registers); HS = 0 takes it from the shape. The loops over
// keys run in the same order in every thread, so the threads of a warp read the same key row
// at the same step (one broadcast load).
struct AttnShape {
  int B, T, C, NH;
  GT_HD int hs() const { return C / NH; }
  GT_HD const float* q(const float* qkv, int b, int t, int h) const {
    return qkv + (int64_t(b) * T + t) * 3 * C + h * hs();
  }
  GT_HD const float* k(const float* qkv, int b, int t, int h) const { return q(qkv, b, t, h) + C; }
  GT_HD const float* v(const float* qkv, int b, int t, int h) const {
    return q(qkv, b, t, h) + 2 * C;
  }
};
template <int HS = 0>
GT_HD float dot(const float* a, const float* b, int n) {
  if (HS > 0) n = HS;  // a compile-time length: the loop unrolls into registers
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// Forward of query row r: out row (f32 or bf16) = softmax(q K^T * scale) V over keys 0..t, by
/// the online softmax (Milakov & Gimelshein 2018), so no T-long row is kept. lse[r] (may be
/// null) = log-sum-exp of the scaled scores; att (may be null) row (B,NH,T,T) = probabilities
/// (zero above the diagonal), from a second pass.
template <int HS = 0>
GT_HD void attention_forward_row(int64_t r, float* out32, uint16_t* out16, float* lse, float* att,
                                 const float* qkv, AttnShape s) {
  const int t = int(r % s.T), h = int((r / s.T) % s.NH), b = int(r / (int64_t(s.T) * s.NH));
  const int hs = HS > 0 ? HS : s.hs();
  const float scale = 1.0f / sqrtf(float(hs));
  const float* q = s.q(qkv, b, t, h);
  float acc[kMaxHeadSize];
  for (int i = 0; i < hs; ++i) acc[i] = 0.f;
  float mx = -INFINITY, z = 0.f;
  for (int t2 = 0; t2 <= t; ++t2) {
    const float sc = dot<HS>(q, s.k(qkv, b, t2, h), hs) * scale;
    const float* v = s.v(qkv, b, t2, h);
    if (sc > mx) {  // new maximum: rescale what was summed so far
      const float corr = expf(mx - sc);
      z = z * corr + 1.0f;
      for (int i = 0; i < hs; ++i) acc[i] = acc[i] * corr + v[i];
      mx = sc;
    } else {  // also the path of a NaN score, which then spoils this row only
      const float p = expf(sc - mx);
      z += p;
      for (int i = 0; i < hs; ++i) acc[i] += p * v[i];
    }
  }
  const int64_t o = (int64_t(b) * s.T + t) * s.C + h * hs;
  for (int i = 0; i < hs; ++i) store(out32, out16, o + i, acc[i] / z);
  const float l = mx + logf(z);
  if (lse) lse[r] = l;
  if (att) {
    float* a = att + r * s.T;
    for (int t2 = 0; t2 < s.T; ++t2)
      a[t2] = t2 <= t ? expf(dot<HS>(q, s.k(qkv, b, t2, h), hs) * scale - l) : 0.0f;
  }
}

/// The probability p(t, t2) of query row r (= (b,h,t)) and key t2: from att when given, else
/// recomputed from lse.
template <int HS = 0>
GT_HD float attention_p(int64_t r, int t2, const float* att, const float* lse, const float* q,
                        const float* k, int hs, float scale, int T) {
  return att ? att[r * T + t2] : expf(dot<HS>(q, k, hs) * scale - lse[r]);
}

/// delta[r] = sum over t2 of p * (dout_t . v_t2) for query row r: the softmax backward's row
/// sum. With out (f32 or bf16) given, dout_t . out_t instead (equal in exact arithmetic; one
/// dot product, as FlashAttention-2 does).
template <int HS = 0>
GT_HD void attention_delta_row(int64_t r, float* delta, const float* dout, const float* qkv,
                               const float* att, const float* lse, const float* out32,
                               const uint16_t* out16, AttnShape s) {
  const int t = int(r % s.T), h = int((r / s.T) % s.NH), b = int(r / (int64_t(s.T) * s.NH));
  const int hs = HS > 0 ? HS : s.hs();
  const float scale = 1.0f / sqrtf(float(hs));
  const int64_t o = (int64_t(b) * s.T + t) * s.C + h * hs;
  const float* d = dout + o;
  float sum = 0.f;
  if (out32 || out16) {
    for (int i = 0; i < hs; ++i) sum += d[i] * load(out32, out16, o + i);
  } else {
    const float* q = s.q(qkv, b, t, h);
    for (int t2 = 0; t2 <= t; ++t2)
      sum += attention_p<HS>(r, t2, att, lse, q, s.k(qkv, b, t2, h), hs, scale, s.T) *
             dot<HS>(d, s.v(qkv, b, t2, h), hs);
  }
  delta[r] = sum;
}

/// dq of query row r (assigned into dqkv, f32 or bf16): scale * sum over t2 <= t of
/// p (dout_t . v_t2 - delta_t) k_t2.
template <int HS = 0>
GT_HD void attention_dq_row(int64_t r, float* dqkv32, uint16_t* dqkv16, const float* dout,
                            const float* qkv, const float* att, const float* lse,
                            const float* delta, AttnShape s) {
  const int t = int(r % s.T), h = int((r / s.T) % s.NH), b = int(r / (int64_t(s.T) * s.NH));
  const int hs = HS > 0 ? HS : s.hs();
  const float scale = 1.0f / sqrtf(float(hs));
  const float* q = s.q(qkv, b, t, h);
  const float* d = dout + (int64_t(b) * s.T + t) * s.C + h * hs;
  float acc[kMaxHeadSize];
  for (int i = 0; i < hs; ++i) acc[i] = 0.f;
  for (int t2 = 0; t2 <= t; ++t2) {
    const float* k = s.k(qkv, b, t2, h);
    const float p = attention_p<HS>(r, t2, att, lse, q, k, hs, scale, s.T);
    const float ds = p * (dot<HS>(d, s.v(qkv, b, t2, h), hs) - delta[r]) * scale;
    for (int i = 0; i < hs; ++i) acc[i] += ds * k[i];
  }
  const int64_t o = (int64_t(b) * s.T + t) * 3 * s.C + h * hs;
  for (int i = 0; i < hs; ++i) store(dqkv32, dqkv16, o + i, acc[i]);
}

/// dk and dv of key row r (= (b,h,j); assigned into dqkv): over the queries t >= j (from
/// t = T-1 down),
/// dk = scale * sum p (dout_t . v_j - delta_t) q_t and dv = sum p dout_t.
template <int HS = 0>
GT_HD void attention_dkv_row(int64_t r, float* dqkv32, uint16_t* dqkv16, const float* dout,
                             const float* qkv, const float* att, const float* lse,
                             const float* delta, AttnShape s) {
  const int j = int(r % s.T), h = int((r / s.T) % s.NH), b = int(r / (int64_t(s.T) * s.NH));
  const int hs = HS > 0 ? HS : s.hs();
  const float scale = 1.0f / sqrtf(float(hs));
  const float* k = s.k(qkv, b, j, h);
  const float* v = s.v(qkv, b, j, h);
  float dk[kMaxHeadSize], dv[kMaxHeadSize];
  for (int i = 0; i < hs; ++i) dk[i] = dv[i] = 0.f;
  const int64_t r0 = r - j;             // query row (b,h,0)
  for (int t = s.T - 1; t >= j; --t) {  // descending: a warp's threads read one row at a time
    const float* q = s.q(qkv, b, t, h);
    const float* d = dout + (int64_t(b) * s.T + t) * s.C + h * hs;
    const float p = attention_p<HS>(r0 + t, j, att, lse, q, k, hs, scale, s.T);
    const float ds = p * (dot<HS>(d, v, hs) - delta[r0 + t]) * scale;
    for (int i = 0; i < hs; ++i) {
      dk[i] += ds * q[i];
      dv[i] += p * d[i];
    }
  }
  const int64_t o = (int64_t(b) * s.T + j) * 3 * s.C + h * hs;
  for (int i = 0; i < hs; ++i) {
    store(dqkv32, dqkv16, o + s.C + i, dk[i]);
    store(dqkv32, dqkv16, o + 2 * s.C + i, dv[i]);
  }
}

}  // namespace gt::cuda_math
