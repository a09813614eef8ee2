// backend/cpu/fast_math.h: exp written so that GCC vectorises it inside
// `#pragma omp simd` loops (glibc's scalar expf/tanhf were 40 % of a training step).
// exp: Cephes expf (S. Moshier): range reduction x = n ln2 + r with ln2 split in two,
// a degree-6 polynomial for e^r, and 2^n built in the exponent bits; relative error
// below 2e-7 on [-87.3, 88.7] (inputs are clamped there: exp(-inf) gives 1.2e-38, not 0).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/simd512.h"

namespace gt::cpu {

#pragma omp declare simd
inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.3f), 88.7f);  // NaN stays NaN
  // n from 0 for NaN: converting NaN to an integer below is undefined (UBSan found it in
  // BackendOps.NanAndInfinityPropagate); NaN still comes out, through r
  float n = std::floor((x == x ? x : 0.0f) * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

/// float -> bfloat16, round to nearest even (NaN stays a quiet NaN).
#pragma omp declare simd
inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? uint16_t((u >> 16) | 0x40u) : uint16_t(r);
}

/// float -> IEEE half, round to nearest even (the hardware conversion; overflow gives inf).
inline uint16_t to_f16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

/// Largest of a[0..n) (-inf for n = 0), in 16 lanes so that GCC vectorises it (a max
/// reduction is not vectorised under -fno-finite-math-only).
inline float row_max(const float* a, int64_t n) {
  float m[16];
  for (int j = 0; j < 16; ++j) m[j] = -INFINITY;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) m[j] = a[i + j] > m[j] ? a[i + j] : m[j];
  for (; i < n; ++i) m[0] = a[i] > m[0] ? a[i] : m[0];
  float r = m[0];
  for (int j = 1; j < 16; ++j) r = m[j] > r ? m[j] : r;
  return r;
}

/// dst[0..n) = bf16 of src (round to nearest even), vectorised; with AVX-512 through
/// bf16_512 (simd512.h: one instruction with AVX512_BF16, which reads denormals as zero).
inline void store_bf16(uint16_t* dst, const float* src, int64_t n) {
#if GT_SIMD512
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), bf16_512(_mm512_loadu_ps(src + i)));
  if (i < n)
    store_bf16_512(dst + i, lanes_below(i, n), _mm512_maskz_loadu_ps(lanes_below(i, n), src + i));
#else
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
#endif
}

/// SplitMix64 (Steele, Lea and Flood 2014): a counter-based hash, so random bits depend only
/// on (seed, index), never on threads or call order.
#pragma omp declare simd
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// float -> bfloat16 with stochastic rounding (Gupta et al. 2015, "Deep Learning with Limited
/// Numerical Precision"): rounds up with probability equal to the fraction of the bf16 step
/// cut off, so the expected value is f. `bits`: uniform random bits (the low 16 are used).
/// Infinities and NaN convert as in to_bf16.
#pragma omp declare simd
inline uint16_t to_bf16_stochastic(float f, uint32_t bits) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) == 0x7F800000u) return to_bf16(f);
  return uint16_t((u + (bits & 0xFFFFu)) >> 16);
}

/// bfloat16 -> float (exact).
#pragma omp declare simd
inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace gt::cpu
