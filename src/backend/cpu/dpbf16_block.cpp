#include "backend/cpu/dpbf16_block.h"

#include <cstring>

#include "backend/cpu/simd512.h"

#if GT_SIMD512 && defined(__x86_64__)
#define GT_DPBF16_KERNEL 1
#include <cpuid.h>

#include "backend/cpu/bf16_epilogue.h"

#define GT_DPBF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define GT_DPBF16_KERNEL 0
#endif

namespace gt::cpu {

#if GT_DPBF16_KERNEL
namespace {

bool detect_avx512_bf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool f = (b >> 16) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
  if (!f || !bw || !vl || a < 1) return false;  // a: the highest subleaf of leaf 7
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return false;  // OSXSAVE
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0xE6) != 0xE6) return false;  // SSE, AVX, opmask, zmm0-15 upper, zmm16-31
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return (a >> 5) & 1;
}

GT_DPBF16_TARGET inline __m512bh as_bh(__m512i x) { return (__m512bh)x; }

/// The pair of bf16 at p (two 16-bit words, any alignment) in all 16 lanes.
GT_DPBF16_TARGET inline __m512bh pair_bcast(const uint16_t* p) {
  int v;
  std::memcpy(&v, p, sizeof v);
  return as_bh(_mm512_set1_epi32(v));
}

/// Row `row` of C, columns [c0, c0 + 32) (those below N), from the two accumulators v0, v1.
GT_DPBF16_TARGET inline void store_c_row(void* c, int64_t row, int64_t c0, int64_t N,
                                         const AmxEpilogue& e, __m512 v0, __m512 v1) {
  store_epilogue16(c, row, c0, N, lanes_below(c0, N), v0, true, e);
  if (c0 + 16 < N) store_epilogue16(c, row, c0 + 16, N, lanes_below(c0 + 16, N), v1, true, e);
}

/// Rows [row0, row0 + R) of the block (those below `rows`, counted from row0's group start) x
/// its first 16 V columns: R x V accumulators, each step of p V 64-byte loads of B (b0, and b1
/// where V is 2) and R broadcasts of A's pairs. a: the group's first pair; row r's pair p at
/// a + 2 (r rs + p ps) (elements).
template <int R, int V>
GT_DPBF16_TARGET void dp_rows(const uint16_t* a, int64_t rs, int64_t ps, const uint16_t* b0,
                              const uint16_t* b1, int64_t kp, void* c, int64_t row0, int64_t rows,
                              int64_t c0, int64_t N, const AmxEpilogue& e) {
  static_assert(V == 1 || V == 2, "one or two vectors of 16 columns");
  __m512 acc[R][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  {  // C's rows (the multiplier's, gelu's) fetched for writing while the products run
    const int64_t cb = e.c_bf16 ? 2 : 4;
    for (int r = 0; r < R && r < rows; ++r) {
      const char* cp = static_cast<const char*>(c) + ((row0 + r) * N + c0) * cb;
      _mm_prefetch(cp, _MM_HINT_ET0);
      if (cb == 4 && V == 2) _mm_prefetch(cp + 64, _MM_HINT_ET0);
      if (e.dgelu)
        _mm_prefetch(reinterpret_cast<const char*>(e.dgelu + (row0 + r) * N + c0), _MM_HINT_ET0);
      if (e.mul) {
        const int64_t mb = e.mul_bf16 ? 2 : 4;
        const char* mp = static_cast<const char*>(e.mul) + ((row0 + r) * N + c0) * mb;
        _mm_prefetch(mp, _MM_HINT_T0);
        if (mb == 4 && V == 2) _mm_prefetch(mp + 64, _MM_HINT_T0);
      }
    }
  }
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh w0 = as_bh(_mm512_load_si512(b0 + 32 * p));
    const __m512bh w1 = V == 2 ? as_bh(_mm512_load_si512(b1 + 32 * p)) : w0;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh x = pair_bcast(a + 2 * (r * rs + p * ps));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, w0);
      if (V == 2) acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, w1);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    if (r < rows) store_c_row(c, row0 + r, c0, N, e, acc[r][0], acc[r][1]);
}

/// The block's rows in groups of R, V vectors of columns (dp_rows).
template <int R, int V>
GT_DPBF16_TARGET void dp_block(void* c, const Dpbf16A& a, const uint16_t* b0, const uint16_t* b1,
                               int64_t kp, int64_t r0, int64_t rows, int64_t c0, int64_t N,
                               const AmxEpilogue& e) {
  for (int64_t g = 0; g < rows; g += R) {
    if (a.k_major)
      dp_rows<R, V>(a.a + 2 * g, 1, 32, b0, b1, kp, c, r0 + g, rows - g, c0, N, e);
    else
      dp_rows<R, V>(a.a + g * a.ld, a.ld / 2, 1, b0, b1, kp, c, r0 + g, rows - g, c0, N, e);
  }
}

}  // namespace

GT_DPBF16_TARGET void dpbf16_block(void* c, const Dpbf16A& a, const uint16_t* bp, int64_t M,
                                   int64_t N, int64_t K, int64_t i, int64_t j,
                                   const AmxEpilogue& e) {
  const int64_t kt = K / 32, kp = K / 2, r0 = 32 * i, c0 = 32 * j;
  const uint16_t* b0 = bp + 2 * j * kt * 512;
  const uint16_t* b1 = b0 + kt * 512;
  const int64_t rows = M - r0 < 32 ? M - r0 : 32;
  // where C's last block has at most 16 columns (a 65-token vocabulary's classifier: its third
  // block has one), half the work: 8 rows x 16 columns (16 rows would take more pointers to
  // A's rows than there are registers)
  if (c0 + 16 >= N)
    dp_block<8, 1>(c, a, b0, b1, kp, r0, rows, c0, N, e);
  else
    dp_block<8, 2>(c, a, b0, b1, kp, r0, rows, c0, N, e);
}

GT_DPBF16_TARGET void dpbf16_pack_a(uint16_t* dst, const uint16_t* a, int64_t M, int64_t K,
                                    bool trans_a, int64_t r0, int64_t nblocks) {
  if (trans_a) {  // pair row p of a block: stored rows 2p and 2p + 1, its 32 columns m
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      const int64_t m0 = r0 + 32 * blk;
      const __mmask32 m = lanes32_below(m0, M);
      uint16_t* d = dst + blk * 32 * K;
      for (int64_t p = 0; p < K / 2; ++p) {
        __m512i lo, hi;
        interleave_pairs32(a + 2 * p * M + m0, M, m, lo, hi);
        _mm512_storeu_si512(d + 64 * p, lo);
        _mm512_storeu_si512(d + 64 * p + 32, hi);
      }
    }
    return;
  }
  for (int64_t r = 0; r < 32 * nblocks; ++r) {
    uint16_t* d = dst + r * K;
    const bool in = r0 + r < M;
    for (int64_t k = 0; k < K; k += 32)
      _mm512_storeu_si512(d + k,
                          in ? _mm512_loadu_si512(a + (r0 + r) * K + k) : _mm512_setzero_si512());
  }
}

#else  // no AVX-512 in this build

void dpbf16_block(void*, const Dpbf16A&, const uint16_t*, int64_t, int64_t, int64_t, int64_t,
                  int64_t, const AmxEpilogue&) {}
void dpbf16_pack_a(uint16_t*, const uint16_t*, int64_t, int64_t, bool, int64_t, int64_t) {}

#endif

bool dpbf16_available() {
#if GT_DPBF16_KERNEL
  static const bool ok = detect_avx512_bf16();
  return ok;
#else
  return false;
#endif
}

}  // namespace gt::cpu
