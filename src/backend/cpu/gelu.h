// backend/cpu/gelu.h: GELU, tanh form (Hendrycks & Gimpel 2016, as torch's
// approximate='tanh'; computed as x sigmoid(2u), below), and its derivative, element by element and
// as the fused pass that writes both (Backend::gelu_forward_fused). One definition of each, so
// every pass that computes them (forward, recompute, fused) gives bitwise the same values.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backend/cpu/fast_math.h"
#include "backend/cpu/simd512.h"

namespace gt::cpu {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

/// gelu(x) = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), written as x s with
/// s = sigmoid(2u) = 1 / (1 + exp(-2u)) (the same function: 1 + tanh(u) = 2 sigmoid(2u)), and its
/// derivative gelu'(x) = s + x s (1 - s) sqrt(2/pi) 2 (1 + 3 * 0.044715 x^2), from one exp. The
/// sigmoid form has no 1 + tanh(u) to cancel for negative x (against float64, gelu's relative
/// error below 1e-5 on [-12, 12] wherever |gelu| > 1e-30, where the tanh form lost all of it
/// near x = -9) and no division where the vector form takes a reciprocal.
/// The one definition gelu() and gelu_grad() use too (inlined, the unused half is dropped).
inline void gelu_and_grad(float x, float& g, float& d) {
  constexpr float k2 = 2.0f * kGeluScale, kc2 = 2.0f * kGeluScale * 0.044715f;
  const float x2 = x * x;
  const float e = exp_approx(x * (-kc2 * x2 - k2)), s = 1.0f / (1.0f + e);  // e = exp(-2u)
  g = x * s;
  // 1 - s: as e s where s >= 1/2 (no cancellation near s = 1); e s stays below 1 there, so
  // no reassociation under -ffast-math can form an overflowing x e
  const float q = e <= 1.0f ? e * s : 1.0f - s;
  d = g * q * (3.0f * kc2 * x2 + k2) + s;
}

/// gelu(x), as gelu_and_grad.
inline float gelu(float x) {
  float g, d;
  gelu_and_grad(x, g, d);
  return g;
}

/// gelu'(x), as gelu_and_grad.
inline float gelu_grad(float x) {
  float g, d;
  gelu_and_grad(x, g, d);
  return d;
}

#if GT_SIMD512
/// gelu_and_grad on 16 lanes: the same formula, exp(-2u) as exp2_512(-2u log2(e)) (log2(e)
/// folded into the constants; its exponent clamped at 126, reached below x = -10, where s is
/// then 0: the true s is below 2^-126); 1 / (1 + e) as VRCP14PS's estimate,
/// relative error below 2^-14 (Intel SDM), and one Newton step r + r (1 - a r), which leaves about
/// 2^-28: within float's rounding, where a division took 16 cycles per vector. Never NaN for a
/// finite x. Its values differ from the scalar form's (exp_approx, a division) in the last bits:
/// every pass of one build takes one of the two (the vector form wherever AVX-512 is).
inline void gelu_and_grad512(__m512 x, __m512& g, __m512& d) {
  constexpr float k2 = 2.0f * kGeluScale, kc2 = 2.0f * kGeluScale * 0.044715f;
  constexpr float log2e = 1.44269504088896341f;
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 t = _mm512_mul_ps(  // -2u log2(e)
      x, _mm512_fnmadd_ps(_mm512_set1_ps(kc2 * log2e), x2, _mm512_set1_ps(-k2 * log2e)));
  // t clamped to [-150, 126] (x^2 overflows for |x| above 1.8e19, and exp2_512 of -inf would
  // be NaN); VMINPS and VMAXPS return their second operand for a NaN lane: t goes second
  const __m512 e =
      exp2_512(_mm512_max_ps(_mm512_set1_ps(-150.0f), _mm512_min_ps(_mm512_set1_ps(126.0f), t)));
  const __m512 a = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
  const __m512 r = _mm512_rcp14_ps(a);
  // r + r (1 - a r) in FMAs: cpu_backend.cpp is built with -ffast-math, and a product of
  // plain multiplies could be reassociated with x's below in one pass and not in another
  // s = 0 where t reached the clamp (the true s is below 2^-126 there) or is NaN
  const __mmask16 in_range = _mm512_cmp_ps_mask(t, _mm512_set1_ps(126.0f), _CMP_LT_OQ);
  const __m512 s =
      _mm512_maskz_fmadd_ps(in_range, r, _mm512_fnmadd_ps(a, r, _mm512_set1_ps(1.0f)), r);
  g = _mm512_mul_ps(x, s);
  // x s (1 - s) as g (e s): 1 - s = e s, without the cancellation of 1 - s near s = 1. e s
  // with an explicit rounding mode, which -ffast-math cannot reassociate: e reaches 2^126,
  // and x e, formed first, would overflow
  const __m512 q = _mm512_mul_round_ps(e, s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  d = _mm512_fmadd_ps(_mm512_mul_ps(g, q),
                      _mm512_fmadd_ps(_mm512_set1_ps(3.0f * kc2), x2, _mm512_set1_ps(k2)), s);
}
#endif

/// One pass over n elements of inp. kOut: 0 writes out (f32), 1 out and its bf16 copy o16,
/// 2 o16 only; kG: 0 no derivative, 1 dg = gelu' (f32), 2 dg16 = bf16 gelu', 3 dg = gelu' x
/// dout (f32, the unfused backward; nothing else written), 4 dg16 = bf16 of that. With
/// AVX-512 every element goes through gelu_and_grad512 (the last vector masked) and its
/// bf16 rounding through bf16_512, so every GELU pass gives the same values.
template <int kOut, int kG>
void gelu_fused_loop(float* out, uint16_t* o16, float* dg, uint16_t* dg16, const float* inp,
                     int64_t n, const float* dout = nullptr) {
#if GT_SIMD512
  constexpr int64_t kChunk = 2048;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; i += 16) {
      const __mmask16 m = lanes_below(i, end);
      __m512 g, d;
      gelu_and_grad512(_mm512_maskz_loadu_ps(m, inp + i), g, d);
      if constexpr (kG < 3) {
        if constexpr (kOut < 2) _mm512_mask_storeu_ps(out + i, m, g);
        if constexpr (kOut > 0) store_bf16_512(o16 + i, m, g);
      }
      if constexpr (kG == 1) _mm512_mask_storeu_ps(dg + i, m, d);
      if constexpr (kG == 2) store_bf16_512(dg16 + i, m, d);
      if constexpr (kG >= 3) d = _mm512_mul_ps(d, _mm512_maskz_loadu_ps(m, dout + i));
      if constexpr (kG == 3) _mm512_mask_storeu_ps(dg + i, m, d);
      if constexpr (kG == 4) store_bf16_512(dg16 + i, m, d);
    }
  }
#else
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float g, d;
    gelu_and_grad(inp[i], g, d);
    if constexpr (kG < 3) {
      if constexpr (kOut < 2) out[i] = g;
      if constexpr (kOut > 0) o16[i] = to_bf16(g);
    }
    if constexpr (kG == 1) dg[i] = d;
    if constexpr (kG == 2) dg16[i] = to_bf16(d);
    if constexpr (kG == 3) dg[i] = d * dout[i];
    if constexpr (kG == 4) dg16[i] = to_bf16(d * dout[i]);
  }
#endif
}

/// gelu_fused_loop<kOut, g> for a run-time g (0, 1 or 2); dg16 is dg's memory as bf16.
template <int kOut>
void gelu_fused(int g, float* out, uint16_t* o16, float* dg, const float* inp, int64_t n) {
  auto* dg16 = reinterpret_cast<uint16_t*>(dg);
  if (g == 0) return gelu_fused_loop<kOut, 0>(out, o16, dg, dg16, inp, n);
  if (g == 1) return gelu_fused_loop<kOut, 1>(out, o16, dg, dg16, inp, n);
  gelu_fused_loop<kOut, 2>(out, o16, dg, dg16, inp, n);
}

}  // namespace gt::cpu
