// backend/cpu/gelu.h: GELU, tanh form (Hendrycks & Gimpel 2016, as torch's
// approximate='tanh'), and its derivative, element by element and as the fused pass that
// writes both (Backend::gelu_forward_fused). One definition of each, so every pass that
// computes them (forward, recompute, fused) gives bitwise the same values.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backend/cpu/fast_math.h"
#include "backend/cpu/simd512.h"

namespace gt::cpu {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

/// gelu(x) = x/2 (1 + t), t = tanh(sqrt(2/pi) (x + 0.044715 x^3)), and its derivative
/// gelu'(x) = (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), from one tanh.
/// The one definition gelu() and gelu_grad() use too (inlined, the unused half is dropped).
inline void gelu_and_grad(float x, float& g, float& d) {
  const float th = tanh_approx(kGeluScale * (x + 0.044715f * x * x * x));
  g = 0.5f * x * (1.0f + th);
  d = 0.5f * (1.0f + th) +
      0.5f * x * (1.0f - th * th) * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
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
/// gelu_and_grad on 16 lanes (the same formula; tanh as tanh_approx, through exp512).
inline void gelu_and_grad512(__m512 x, __m512& g, __m512& d) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f),
               k = _mm512_set1_ps(kGeluScale), c = _mm512_set1_ps(0.044715f);
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 u = _mm512_mul_ps(k, _mm512_fmadd_ps(_mm512_mul_ps(c, x2), x, x));
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 e = exp512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), _mm512_andnot_ps(sign, u)));
  __m512 th = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  th = _mm512_or_ps(th, _mm512_and_ps(sign, u));  // copysign: th >= 0 before this
  const __m512 hx = _mm512_mul_ps(half, x);
  g = _mm512_fmadd_ps(hx, th, hx);  // x/2 (1 + t)
  const __m512 dd =
      _mm512_mul_ps(_mm512_mul_ps(hx, _mm512_fnmadd_ps(th, th, one)),
                    _mm512_mul_ps(k, _mm512_fmadd_ps(_mm512_set1_ps(3.0f * 0.044715f), x2, one)));
  d = _mm512_fmadd_ps(half, th, _mm512_add_ps(half, dd));  // (1 + t)/2 + ...
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
