// backend/cpu/gelu.h: GELU, tanh form (Hendrycks & Gimpel 2016, as torch's
// approximate='tanh'), and its derivative, element by element and as the fused pass that
// writes both (Backend::gelu_forward_fused). One definition of each, so every pass that
// computes them (forward, recompute, fused) gives bitwise the same values.
#pragma once
#include <cstdint>

#include "backend/cpu/fast_math.h"

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

/// One pass over n elements of inp. kOut: 0 writes out (f32), 1 out and its bf16 copy o16,
/// 2 o16 only; kG: 0 no derivative, 1 dg = gelu' (f32), 2 dg16 = bf16 gelu'.
template <int kOut, int kG>
void gelu_fused_loop(float* out, uint16_t* o16, float* dg, uint16_t* dg16, const float* inp,
                     int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float g, d;
    gelu_and_grad(inp[i], g, d);
    if constexpr (kOut < 2) out[i] = g;
    if constexpr (kOut > 0) o16[i] = to_bf16(g);
    if constexpr (kG == 1) dg[i] = d;
    if constexpr (kG == 2) dg16[i] = to_bf16(d);
  }
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
