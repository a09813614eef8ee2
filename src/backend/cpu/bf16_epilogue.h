// backend/cpu/bf16_epilogue.h: the last step of the own bf16 product (amx_matmul.h) for 16
// columns of one row of C, shared by its AMX form (from the tiles' f32 buffer) and its vector
// form (dpbf16_block.h, from registers). Include only where the compiler targets x86-64 with
// AVX-512 F and BW (simd512.h's GT_SIMD512).
#pragma once
#include <cstdint>

#include "backend/cpu/amx_matmul.h"
#include "backend/cpu/gelu.h"
#include "backend/cpu/simd512.h"

namespace gt::cpu {

/// Columns [col, col + 16) of C's row `row` (lanes of m: those below N; C row-major, N wide)
/// from the f32 product v, in oneDNN's order: (v + bias, where add_bias) * mul, then a bf16 C
/// rounded to nearest even (VCVTNEPS2BF16, which flushes denormals to zero, as oneDNN's bf16
/// stores on these CPUs), or an f32 C (+ its old value when e.accumulate). With e.gelu, C =
/// gelu of that value and e.dgelu (if set) gelu' of it, both as gelu_fused_loop computes and
/// rounds them (gelu.h: the same bits as an f32 C followed by that pass).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) inline void store_epilogue16(
    void* c, int64_t row, int64_t col, int64_t N, __mmask16 m, __m512 v, bool add_bias,
    const AmxEpilogue& e) {
  if (add_bias && e.bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, e.bias + col));
  if (e.mul) {
    const __m512 f =
        e.mul_bf16 ? widen_bf16_512(_mm256_maskz_loadu_epi16(
                         m, static_cast<const uint16_t*>(e.mul) + row * N + col))
                   : _mm512_maskz_loadu_ps(m, static_cast<const float*>(e.mul) + row * N + col);
    v = _mm512_mul_ps(v, f);
  }
  if (e.gelu) {
    __m512 g, d;
    gelu_and_grad512(v, g, d);
    if (e.dgelu) store_bf16_512(e.dgelu + row * N + col, m, d);
    if (e.c_bf16)
      store_bf16_512(static_cast<uint16_t*>(c) + row * N + col, m, g);
    else
      _mm512_mask_storeu_ps(static_cast<float*>(c) + row * N + col, m, g);
    return;
  }
  if (e.c_bf16) {
    _mm256_mask_storeu_epi16(static_cast<uint16_t*>(c) + row * N + col, m,
                             reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
  } else {
    float* cp = static_cast<float*>(c) + row * N + col;
    if (e.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, cp));
    _mm512_mask_storeu_ps(cp, m, v);
  }
}

}  // namespace gt::cpu
