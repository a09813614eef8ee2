// backend/cpu/simd512.h: AVX-512 forms of fast_math.h's exp and bf16 rounding, and masked
// 16-lane helpers for short rows. GCC vectorises `omp simd` loops only in whole vectors and
// finishes each row with a scalar loop; for attention's score rows (1 to T long, one per
// query) those scalar tails were most of the softmax time. Here a row's last partial vector
// is a masked one.
// exp512 computes exactly the steps of exp_approx (Cephes expf: the same range reduction and
// polynomial, 2^n applied with vscalefps); bf16_512 is to_bf16 (round to nearest even, NaN
// kept quiet) on 16 lanes, so rows rounded here equal rows rounded by to_bf16.
// Only compiled where the compiler targets AVX-512 F and BW (GT_SIMD512 is then 1).
#pragma once
#if defined(__AVX512F__) && defined(__AVX512BW__)
#define GT_SIMD512 1
// GCC 12 warns that the masked and reducing intrinsics read an uninitialised vector (its
// bug 105593, fixed in GCC 13); the warnings point into the intrinsics' header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cmath>
#include <cstdint>

namespace gt::cpu {

/// r[p] = row p of a 16 x 16 matrix of 32-bit values; on return r[m] = its column m (the
/// unpack / 128-bit-lane shuffle transpose).
inline void transpose16(__m512i* r) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 4; ++i) {
      t[8 * h + i] = _mm512_shuffle_i32x4(r[8 * h + i], r[8 * h + 4 + i], 0x88);
      t[8 * h + 4 + i] = _mm512_shuffle_i32x4(r[8 * h + i], r[8 * h + 4 + i], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0xdd);
  }
}

/// exp of 16 floats, as exp_approx (inputs clamped to [-87.3, 88.7]; NaN stays NaN: VMAXPS and
/// VMINPS return their SECOND operand when either is NaN, so x goes second).
inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(88.7f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));
  const __m512 n = _mm512_roundscale_ps(
      _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

/// 2^t of 16 floats for t <= 126 (a larger t must be clamped by the caller; a NaN stays NaN):
/// t = n + f with n the nearest integer (|f| <= 1/2), 2^f from Cephes exp2f's degree-6
/// polynomial (S. Moshier, Cephes Math Library, exp2f.c), 2^n applied with VSCALEFPS (which
/// gives 0 below the float range). Relative error below 8e-8 against exp2 in double on
/// [-126, 126] (measured here on every 7th float). Ten operations where exp512 takes sixteen:
/// exp(y) is exp2_512(y log2(e)), with log2(e) folded into the caller's constants.
inline __m512 exp2_512(__m512 t) {
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

/// 16 floats -> 16 bf16, round to nearest even, NaN -> quiet NaN (as to_bf16). With
/// AVX512_BF16 this is one VCVTNEPS2BF16, which also treats denormal inputs as zero (Intel
/// SDM, "VCVTNEPS2BF16": DAZ, no MXCSR), as oneDNN's own bf16 conversions on such CPUs do;
/// every normal, infinite and NaN input gives to_bf16's result. The rounding in integer
/// operations it replaces was a third of the fused GELU pass.
inline __m256i bf16_512(__m512 x) {
#ifdef __AVX512BF16__
  return (__m256i)_mm512_cvtneps_pbh(x);
#else
  const __m512i u = _mm512_castps_si512(x);
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                _mm512_set1_epi32(0x7F800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
#endif
}

/// Lanes i..i+15 that are below n: the mask of a row's (possibly partial) vector at i.
inline __mmask16 lanes_below(int64_t i, int64_t n) {
  const int64_t k = n - i;
  return k >= 16 ? __mmask16(0xFFFF) : k <= 0 ? __mmask16(0) : __mmask16((1u << k) - 1);
}

/// Columns [c0, c0 + 32) of two stored rows r and r + stride (r points at column c0), mask m
/// of them (bit i: column c0 + i): into lo the 16 pairs (r[n], (r + stride)[n]) of the first
/// 16 columns, into hi those of the next 16 (AMX's pair layout), zeros outside the mask. Each
/// row's 64 bytes are one load, a cache line where the row is aligned (16 columns at a time,
/// each line was read twice, once for each tile).
inline void interleave_pairs32(const uint16_t* r, int64_t stride, __mmask32 m, __m512i& lo,
                               __m512i& hi) {
  const __m512i lo_idx =
      _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                       37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i hi_idx = _mm512_add_epi16(lo_idx, _mm512_set1_epi16(16));
  const __m512i e = _mm512_maskz_loadu_epi16(m, r), o = _mm512_maskz_loadu_epi16(m, r + stride);
  lo = _mm512_permutex2var_epi16(e, lo_idx, o);
  hi = _mm512_permutex2var_epi16(e, hi_idx, o);
}

/// The mask of 32 lanes i with i0 + i < n.
inline __mmask32 lanes32_below(int64_t i0, int64_t n) {
  const int64_t k = n - i0;
  return k >= 32 ? __mmask32(0xFFFFFFFFu) : k <= 0 ? __mmask32(0) : __mmask32((1u << k) - 1);
}

/// Stores the lanes of `mask` of 16 bf16 values.
/// 16 bf16 -> 16 floats (exact: the bf16 bits as the float's upper half), as bf16_to_float.
inline __m512 widen_bf16_512(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

inline void store_bf16_512(uint16_t* dst, __mmask16 mask, __m512 x) {
  _mm256_mask_storeu_epi16(dst, mask, bf16_512(x));
}

/// A softmax row's first two passes: a[0..n) = exp(a[i] - max) in place (exp512, the last
/// vector masked), max into maxv; returns the sum of the exps. The attention's and the
/// classifier's softmax rows both start with it, and scale by 1 / sum (or dloss / sum) after.
inline float exp_minus_max_row512(float* a, int64_t n, float& maxv) {
  __m512 vm = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16)
    vm = _mm512_max_ps(vm, _mm512_mask_loadu_ps(vm, lanes_below(i, n), a + i));
  maxv = _mm512_reduce_max_ps(vm);
  const __m512 mx = _mm512_set1_ps(maxv);
  __m512 vs = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes_below(i, n);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, a + i), mx));
    _mm512_mask_storeu_ps(a + i, m, e);
    vs = _mm512_mask_add_ps(vs, m, vs, e);
  }
  return _mm512_reduce_add_ps(vs);
}

}  // namespace gt::cpu
#else
#define GT_SIMD512 0
#endif
