#include "backend/cpu/attention_bf16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "backend/cpu/amx_matmul.h"
#include "backend/cpu/simd512.h"

#if GT_SIMD512 && defined(__AVX512BF16__)
#define GT_ATTN_BF16 1
#else
#define GT_ATTN_BF16 0
#endif
#if GT_ATTN_BF16 && defined(__x86_64__) && defined(__linux__)
#define GT_ATTN_AMX 1
#include "backend/cpu/amx_tiles.h"
#else
#define GT_ATTN_AMX 0
#endif

namespace gt::cpu {

#if GT_ATTN_BF16
namespace {

constexpr int64_t kTile = 16;   // queries per vector; keys are skipped in steps of 16 too
constexpr int64_t kChunk = 64;  // queries whose scores, P and dS are kept at a time

int64_t pad16(int64_t n) { return (n + kTile - 1) / kTile * kTile; }

inline __m512bh as_bh(__m512i x) { return (__m512bh)x; }

/// 16 bf16 (nearest even) of 16 floats.
inline __m256i to_bh16(__m512 x) { return (__m256i)_mm512_cvtneps_pbh(x); }

/// The 16-bit word order that interleaves a vector's two halves: (lo[0], hi[0], lo[1], ...).
alignas(64) constexpr uint16_t kPairIdx[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                               21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                               11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

/// The 16 words (lo[i], hi[i]) of two rows' 16 floats: a VNNI vector.
inline __m512i pair_words(__m512 lo, __m512 hi) {
  return _mm512_permutexvar_epi16(_mm512_load_si512(kPairIdx),
                                  (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/// lo in the low 256 bits, hi in the high.
inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/// 16 bf16 words at p.
inline __m256i load_words(const uint16_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

/// C(m, 16 v + i) (+)= sum over p in [p0, p1) of A(m, p) . B(p, 16 v + i) for m < R, v < NV
/// (acc: added to C, else assigned). A's word (m, p) is A[m a_row + p a_k]; B's vector (p, v)
/// starts at B + p ldb + 16 v (words); C's row m at Cm + m ldc (floats).
template <int R, int NV>
inline void micro(const uint32_t* A, int64_t a_row, int64_t a_k, const uint32_t* B, int64_t ldb,
                  int64_t p0, int64_t p1, float* Cm, int64_t ldc, bool acc) {
  __m512 c[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      c[r][v] = acc ? _mm512_loadu_ps(Cm + r * ldc + 16 * v) : _mm512_setzero_ps();
  for (int64_t p = p0; p < p1; ++p) {
    __m512bh b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = as_bh(_mm512_loadu_si512(B + p * ldb + 16 * v));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh a = as_bh(_mm512_set1_epi32(static_cast<int>(A[r * a_row + p * a_k])));
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) c[r][v] = _mm512_dpbf16_ps(c[r][v], a, b[v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(Cm + r * ldc + 16 * v, c[r][v]);
}

constexpr int64_t kNoDiag = INT64_MIN;

/// micro over M rows in groups of R. Causal limits per group (kNoDiag: none): the group at
/// row m sums p from (lo + m) / 2 on (rows whose first nonzero column is lo + m) and below
/// (hi + m + R) / 2 (rows whose last nonzero column is hi + m + R - 1).
template <int R, int NV>
void micro_rows(int64_t M, const uint32_t* A, int64_t a_row, int64_t a_k, const uint32_t* B,
                int64_t ldb, int64_t p0, int64_t p1, float* Cm, int64_t ldc, bool acc, int64_t lo,
                int64_t hi) {
  for (int64_t m = 0; m < M; m += R) {
    const int64_t b = lo == kNoDiag ? p0 : std::max(p0, (lo + m) / 2);
    const int64_t e = hi == kNoDiag ? p1 : std::min(p1, (hi + m + R) / 2);
    micro<R, NV>(A + m * a_row, a_row, a_k, B, ldb, b, e, Cm + m * ldc, ldc, acc);
  }
}

/// The product of micro for M rows (a multiple of 16) and nv vectors of 16 columns, in
/// register tiles of up to 16 accumulators; lo, hi as micro_rows.
void gemm(int64_t M, int64_t nv, const uint32_t* A, int64_t a_row, int64_t a_k, const uint32_t* B,
          int64_t ldb, int64_t p0, int64_t p1, float* Cm, int64_t ldc, bool acc,
          int64_t lo = kNoDiag, int64_t hi = kNoDiag) {
  for (int64_t v0 = 0; v0 < nv;) {
    const int64_t g = std::min<int64_t>(nv - v0, 4);
    const uint32_t* Bv = B + 16 * v0;
    float* Cv = Cm + 16 * v0;
    switch (g) {
      case 4:
        micro_rows<4, 4>(M, A, a_row, a_k, Bv, ldb, p0, p1, Cv, ldc, acc, lo, hi);
        break;
      case 3:
        micro_rows<4, 3>(M, A, a_row, a_k, Bv, ldb, p0, p1, Cv, ldc, acc, lo, hi);
        break;
      case 2:
        micro_rows<8, 2>(M, A, a_row, a_k, Bv, ldb, p0, p1, Cv, ldc, acc, lo, hi);
        break;
      default:
        micro_rows<8, 1>(M, A, a_row, a_k, Bv, ldb, p0, p1, Cv, ldc, acc, lo, hi);
        break;
    }
    v0 += g;
  }
}

#if GT_ATTN_AMX
/// The tiles of tiles_gemm: 0-3 C (16 x 16 f32), 4 and 5 A and B 16 words deep, 6 and 7 A
/// and B 8 words deep. Call before tiles_gemm on each thread, amx_end after.
GT_AMX_TARGET void amx_begin() {
  TileConfig cfg;
  for (int i = 0; i < 6; ++i) {
    cfg.rows[i] = 16;
    cfg.colsb[i] = 64;
  }
  cfg.rows[6] = 16;  // A: 16 rows of 8 words
  cfg.colsb[6] = 32;
  cfg.rows[7] = 8;  // B: 8 words of 16 columns
  cfg.colsb[7] = 64;
  _tile_loadconfig(&cfg);
}
GT_AMX_TARGET void amx_end() { _tile_release(); }

/// micro's product for 16 rows and G (1 to 4) vectors of 16 columns on AMX tiles (TDPBF16PS,
/// the same sums over p in order, each in f32): A's word (m, p) at A[m a_row + p] (p
/// contiguous), p1 - p0 a multiple of 8.
template <int G>
GT_AMX_TARGET void tiles_gemm_g(const uint32_t* A, int64_t a_row, const uint32_t* B, int64_t ldb,
                                int64_t p0, int64_t p1, float* Cm, int64_t ldc, bool acc) {
  const int64_t cs = ldc * 4, as = a_row * 4, bs = ldb * 4;
  if (acc) {
    _tile_loadd(0, Cm, cs);
    if constexpr (G > 1) _tile_loadd(1, Cm + 16, cs);
    if constexpr (G > 2) _tile_loadd(2, Cm + 32, cs);
    if constexpr (G > 3) _tile_loadd(3, Cm + 48, cs);
  } else {
    _tile_zero(0);
    if constexpr (G > 1) _tile_zero(1);
    if constexpr (G > 2) _tile_zero(2);
    if constexpr (G > 3) _tile_zero(3);
  }
  int64_t p = p0;
  for (; p + 16 <= p1; p += 16) {
    const uint32_t* Bp = B + p * ldb;
    _tile_loadd(4, A + p, as);
    _tile_loadd(5, Bp, bs);
    _tile_dpbf16ps(0, 4, 5);
    if constexpr (G > 1) {
      _tile_loadd(5, Bp + 16, bs);
      _tile_dpbf16ps(1, 4, 5);
    }
    if constexpr (G > 2) {
      _tile_loadd(5, Bp + 32, bs);
      _tile_dpbf16ps(2, 4, 5);
    }
    if constexpr (G > 3) {
      _tile_loadd(5, Bp + 48, bs);
      _tile_dpbf16ps(3, 4, 5);
    }
  }
  if (p < p1) {  // 8 words left
    const uint32_t* Bp = B + p * ldb;
    _tile_loadd(6, A + p, as);
    _tile_loadd(7, Bp, bs);
    _tile_dpbf16ps(0, 6, 7);
    if constexpr (G > 1) {
      _tile_loadd(7, Bp + 16, bs);
      _tile_dpbf16ps(1, 6, 7);
    }
    if constexpr (G > 2) {
      _tile_loadd(7, Bp + 32, bs);
      _tile_dpbf16ps(2, 6, 7);
    }
    if constexpr (G > 3) {
      _tile_loadd(7, Bp + 48, bs);
      _tile_dpbf16ps(3, 6, 7);
    }
  }
  _tile_stored(0, Cm, cs);
  if constexpr (G > 1) _tile_stored(1, Cm + 16, cs);
  if constexpr (G > 2) _tile_stored(2, Cm + 32, cs);
  if constexpr (G > 3) _tile_stored(3, Cm + 48, cs);
}
#endif

/// gemm for 16 rows whose A has p contiguous (a_k 1), on AMX tiles when `amx` (after
/// amx_begin; p0 and p1 multiples of 8, and the words that lo would skip zero), else gemm.
void gemm16(bool amx, int64_t nv, const uint32_t* A, int64_t a_row, const uint32_t* B, int64_t ldb,
            int64_t p0, int64_t p1, float* Cm, int64_t ldc, bool acc, int64_t lo = kNoDiag) {
#if GT_ATTN_AMX
  if (amx) {
    for (int64_t v0 = 0; v0 < nv; v0 += 4) {
      const uint32_t* Bv = B + 16 * v0;
      float* Cv = Cm + 16 * v0;
      switch (std::min<int64_t>(nv - v0, 4)) {
        case 4:
          tiles_gemm_g<4>(A, a_row, Bv, ldb, p0, p1, Cv, ldc, acc);
          break;
        case 3:
          tiles_gemm_g<3>(A, a_row, Bv, ldb, p0, p1, Cv, ldc, acc);
          break;
        case 2:
          tiles_gemm_g<2>(A, a_row, Bv, ldb, p0, p1, Cv, ldc, acc);
          break;
        default:
          tiles_gemm_g<1>(A, a_row, Bv, ldb, p0, p1, Cv, ldc, acc);
          break;
      }
    }
    return;
  }
#endif
  gemm(kTile, nv, A, a_row, 1, B, ldb, p0, p1, Cm, ldc, acc, lo);
}

/// Whether this thread's head runs its products with p contiguous on AMX tiles: the CPU has
/// them and greentrain's own AMX code is on (GT_CPU_OWN_AMX, amx_matmul.h).
bool use_amx() {
#if GT_ATTN_AMX
  return own_amx_enabled();
#else
  return false;
#endif
}

/// amx_begin/amx_end around a head's products when `on`.
struct AmxScope {
  bool on;
  explicit AmxScope(bool on_) : on(on_) {
#if GT_ATTN_AMX
    if (on) amx_begin();
#endif
  }
  ~AmxScope() {
#if GT_ATTN_AMX
    if (on) amx_end();
#endif
  }
  AmxScope(const AmxScope&) = delete;
  AmxScope& operator=(const AmxScope&) = delete;
};

/// Where pack_head writes one matrix X (T valid rows of Tp, hs columns) of a head; each
/// pointer may be null (that layout is not wanted).
struct PackOut {
  uint16_t* rows = nullptr;   ///< bf16 rows (Tp, hs): a left operand, one word at a time
  uint32_t* pairs = nullptr;  ///< VNNI (Tp/2, hs words): word (p, c) = (X[2p][c], X[2p+1][c])
  uint32_t* tr = nullptr;  ///< VNNI of X^T (hs/2, Tp words): word (p, n) = (X[n][2p], X[n][2p+1])
};

/// 16 floats at p, or 16 bf16 widened (exact).
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  return widen_bf16_512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

/// Packs n matrices of a head (src[m]: row 0, rows ld elements apart; S float or bf16, whose
/// rounding to bf16 is itself) into the layouts out[m] asks for, rows past T as zeros, in one
/// pass over the rows: the rows of all matrices are read together, four rows ahead prefetched
/// (rows are 3C elements apart, too far apart for the hardware prefetcher to follow).
template <class S>
void pack_head(int n, const S* const* src, const PackOut* out, int64_t ld, int64_t T, int64_t Tp,
               int64_t hs) {
  alignas(64) static constexpr uint32_t kIdx[16] = {0, 8,  1, 9,  2, 10, 3, 11,
                                                    4, 12, 5, 13, 6, 14, 7, 15};
  const __m512i idx = _mm512_load_si512(kIdx);
  const __m512i pair_idx = _mm512_load_si512(kPairIdx);
  const __m512 z = _mm512_setzero_ps();
  for (int m = 0; m < n; ++m)
    for (int64_t u = 4; u < std::min<int64_t>(16, T); ++u)
      for (int64_t c = 0; c < hs; c += 16) __builtin_prefetch(src[m] + u * ld + c);
  for (int64_t t = 0; t < Tp; t += 2) {
    for (int m = 0; m < n; ++m)
      for (int64_t u = t + 16; u < std::min(t + 18, T); ++u)
        for (int64_t c = 0; c < hs; c += 16) __builtin_prefetch(src[m] + u * ld + c);
    for (int m = 0; m < n; ++m) {
      const PackOut& o = out[m];
      for (int64_t c = 0; c < hs; c += 16) {
        __m256i b0, b1;
        if constexpr (std::is_same_v<S, uint16_t>) {  // bf16 rows: their words as they are
          b0 = t < T ? load_words(src[m] + t * ld + c) : _mm256_setzero_si256();
          b1 = t + 1 < T ? load_words(src[m] + (t + 1) * ld + c) : _mm256_setzero_si256();
          if (o.pairs)
            _mm512_storeu_si512(o.pairs + t / 2 * hs + c,
                                _mm512_permutexvar_epi16(pair_idx, join(b0, b1)));
        } else {
          const __m512 x0 = t < T ? load16(src[m] + t * ld + c) : z;
          const __m512 x1 = t + 1 < T ? load16(src[m] + (t + 1) * ld + c) : z;
          if (o.pairs) _mm512_storeu_si512(o.pairs + t / 2 * hs + c, pair_words(x0, x1));
          if (!o.rows && !o.tr) continue;
          b0 = to_bh16(x0), b1 = to_bh16(x1);
        }
        if (o.rows) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.rows + t * hs + c), b0);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.rows + (t + 1) * hs + c), b1);
        }
        if (o.tr) {  // qword p: (row t's word c/2 + p, row t+1's), both go to column t, t+1
          alignas(64) uint64_t q[8];
          _mm512_store_si512(q, _mm512_permutexvar_epi32(idx, join(b0, b1)));
          for (int64_t p = 0; p < 8; ++p)
            std::memcpy(o.tr + (c / 2 + p) * Tp + t, q + p, sizeof(uint64_t));
        }
      }
    }
  }
}

/// m rows of hs floats (dense) into rows of stride ld at dst and dst16, each may be null. The
/// f32 rows are written with streaming stores where they are 64-byte aligned (as attention.cpp
/// does: written once here and read by a later op, they need no read for ownership); the
/// caller fences them (Attention::for_heads does).
void unpack(float* dst, uint16_t* dst16, const float* src, int64_t m, int64_t hs, int64_t ld) {
  const bool aligned = (reinterpret_cast<uintptr_t>(dst) & 63) == 0 && ld % 16 == 0;
  for (int64_t t = 0; t < m; ++t) {
    if (dst && aligned)
      for (int64_t c = 0; c < hs; c += 16)
        _mm512_stream_ps(dst + t * ld + c, _mm512_loadu_ps(src + t * hs + c));
    else if (dst)
      for (int64_t c = 0; c < hs; c += 16)
        _mm512_storeu_ps(dst + t * ld + c, _mm512_loadu_ps(src + t * hs + c));
    if (dst16)
      for (int64_t c = 0; c < hs; c += 16)
        store_bf16_512(dst16 + t * ld + c, 0xFFFF, _mm512_loadu_ps(src + t * hs + c));
  }
}

/// The 16 words from src of np word rows (row p at src + p ld; np a multiple of 8) as 16 rows
/// of np words (row m at dst + m dst_ld): P or dS of 16 queries, written with keys as rows for
/// the vector unit's products, turned into the row-major left operand of an AMX product.
void words_t(const uint32_t* src, int64_t ld, int64_t np, uint32_t* dst, int64_t dst_ld) {
  for (int64_t p0 = 0; p0 < np; p0 += 16) {
    const int64_t n = std::min<int64_t>(16, np - p0);
    __m512i r[16];
    for (int64_t i = 0; i < 16; ++i)
      r[i] = i < n ? _mm512_loadu_si512(src + (p0 + i) * ld) : _mm512_setzero_si512();
    transpose16(r);
    const __mmask16 m = n == 16 ? 0xFFFF : 0x00FF;
    for (int64_t i = 0; i < 16; ++i) _mm512_mask_storeu_epi32(dst + i * dst_ld + p0, m, r[i]);
  }
}

/// O (16 x 16 nv, ld hs) = W B over pairs 0 .. np - 1, for 16 queries from t0: W their words
/// (pairs of keys) as the softmax wrote them, one row per pair (at w, ld kChunk); B (ld hs).
/// On tiles the words are transposed into query rows first (into rows, ld rows_ld), as AMX's
/// left operand needs; the vector product reads them as they are. O = P v and dQ = dS k.
void queries_product(bool amx, const uint32_t* w, int64_t np, uint32_t* rows, int64_t rows_ld,
                     int64_t nv, const uint32_t* B, int64_t hs, float* O, int64_t t0) {
  if (amx) {
    words_t(w, kChunk, np, rows, rows_ld);
    gemm16(true, nv, rows, rows_ld, B, hs, 0, np, O, hs, false);
  } else {
    gemm(kTile, nv, w, 1, kChunk, B, hs, 0, np, O, hs, false, kNoDiag, t0);
  }
}

/// A thread's buffer: byte offsets of each array, 64-byte aligned. Names: q, k, v, d (dO);
/// suffix r: bf16 rows, p: VNNI pairs of rows, t: VNNI of the transpose (PackOut).
struct Bufs {
  int64_t T, Tp, hs;
  size_t qt, qp, kr, kp, vr, vp, dt, dp, s, g, pw, pr, dsr, o, dk, dv, prow, total;
  Bufs(int64_t T_, int64_t hs_) : T(T_), Tp(pad16(T_)), hs(hs_) {
    size_t at = 0;
    auto take = [&](size_t bytes) {
      const size_t off = at;
      at += (bytes + 63) / 64 * 64;
      return off;
    };
    const size_t head = Tp * hs * 2, chunk = Tp * kChunk;
    qt = take(head);
    qp = take(head);
    kr = take(head);
    kp = take(head);
    vr = take(head);
    vp = take(head);
    dt = take(head);
    dp = take(head);
    s = take(chunk * sizeof(float));
    g = take(chunk * sizeof(float));
    pw = take(chunk * 2);
    pr = take(chunk * 2);
    dsr = take(chunk * 2);
    o = take(kTile * hs * sizeof(float));
    dk = take(Tp * hs * sizeof(float));
    dv = take(Tp * hs * sizeof(float));
    prow = take(kTile * Tp * 2);  // 16 queries' P or dS as rows of Tp / 2 words
    total = at;
  }
};

template <class X>
X* at(unsigned char* buf, size_t off) {
  return reinterpret_cast<X*>(buf + off);
}

/// Lanes (queries t0..t0+15) for which key k is causal (k <= t), among those below T.
inline __mmask16 causal_lanes(int64_t k, int64_t t0, __mmask16 below_T) {
  return k <= t0 ? below_T : __mmask16((0xFFFFu << (k - t0)) & below_T);
}

/// The transposed scores of a chunk of queries q0..q0+nq-1 (nq a multiple of 16, at most
/// kChunk): S^T(k, j) = a_k . b_{q0+j} for keys k < q0 + nq, 16 keys at a time, each block only
/// for the query vectors at or after it (the rest is masked). A: keys' bf16 rows (Tp, hs); Bt:
/// VNNI of the queries' transpose (hs/2, Tp words). S: rows of kChunk floats.
void scores_t(bool amx, const uint32_t* A, const uint32_t* Bt, float* S, int64_t q0, int64_t nq,
              int64_t Tp, int64_t hs) {
  const int64_t hp = hs / 2;
  for (int64_t k0 = 0; k0 < q0 + nq; k0 += kTile) {
    const int64_t v0 = k0 > q0 ? (k0 - q0) / 16 : 0;
    gemm16(amx, nq / 16 - v0, A + k0 * hp, hp, Bt + q0 + 16 * v0, Tp, 0, hp,
           S + k0 * kChunk + 16 * v0, kChunk, false);
  }
}

/// q, k and v of a head (qkv at its q, row 0) into the layouts o[0..2] ask for.
void pack_qkv(QkvRows qkv, const PackOut* o, int64_t C, int64_t T, int64_t Tp, int64_t hs) {
  if (qkv.bf16) {
    const uint16_t* src[3] = {qkv.bf16, qkv.bf16 + C, qkv.bf16 + 2 * C};
    return pack_head(3, src, o, 3 * C, T, Tp, hs);
  }
  const float* src[3] = {qkv.f32, qkv.f32 + C, qkv.f32 + 2 * C};
  pack_head(3, src, o, 3 * C, T, Tp, hs);
}

}  // namespace

bool attn_bf16_supported(int hs) { return hs >= 16 && hs <= 128 && hs % 16 == 0; }

size_t attn_bf16_head_bytes(int T, int hs) { return Bufs(T, hs).total; }

// Both directions work on chunks of up to kChunk queries, with the scores transposed (keys
// as rows, 16 queries per vector): a softmax over keys is then element-wise over rows, 16
// queries at once, with no reduction across lanes.
void attn_bf16_forward_head(unsigned char* buf, QkvRows qkv, int T_, int C_, int hs_, float* out,
                            uint16_t* out16, float* lse) {
  const Bufs b(T_, hs_);
  const int64_t T = T_, C = C_, hs = hs_, Tp = b.Tp;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  {
    PackOut o[3];
    o[0].tr = at<uint32_t>(buf, b.qt);
    o[1].rows = at<uint16_t>(buf, b.kr);
    o[2].pairs = at<uint32_t>(buf, b.vp);
    pack_qkv(qkv, o, C, T, Tp, hs);
  }
  const AmxScope amx(use_amx());
  float *S = at<float>(buf, b.s), *O = at<float>(buf, b.o);
  uint32_t* Pw = at<uint32_t>(buf, b.pw);
  const __m512 sc = _mm512_set1_ps(scale);
  for (int64_t q0 = 0; q0 < Tp; q0 += kChunk) {
    const int64_t nq = std::min(kChunk, Tp - q0);
    scores_t(amx.on, at<uint32_t>(buf, b.kr), at<uint32_t>(buf, b.qt), S, q0, nq, Tp, hs);
    for (int64_t j = 0; j < nq; j += 16) {  // queries t0..t0+15, keys 0..kend-1
      const int64_t t0 = q0 + j, kend = t0 + 16;
      const __mmask16 below = lanes_below(t0, T);
      float* Sj = S + j;
      __m512 mx = _mm512_set1_ps(-INFINITY);
      for (int64_t k = 0; k < kend; ++k)
        mx = _mm512_mask_max_ps(mx, causal_lanes(k, t0, below), mx,
                                _mm512_loadu_ps(Sj + k * kChunk));
      mx = _mm512_mul_ps(_mm512_maskz_mov_ps(below, mx), sc);
      __m512 sum = _mm512_setzero_ps();
      for (int64_t k = 0; k < kend; ++k) {
        const __m512 e =
            _mm512_maskz_mov_ps(causal_lanes(k, t0, below),
                                exp512(_mm512_fmsub_ps(_mm512_loadu_ps(Sj + k * kChunk), sc, mx)));
        _mm512_storeu_ps(Sj + k * kChunk, e);
        sum = _mm512_add_ps(sum, e);
      }
      // no vector stays live across a call (std::log, gemm): GCC would keep it in memory,
      // and the sum above would then be a chain of stores and loads
      alignas(64) float m16[16], s16[16];
      _mm512_store_ps(m16, mx);
      _mm512_store_ps(s16, sum);
      // lanes past T have no causal key (sum 0): inv 0, their P and O are never stored out
      const __m512 inv = _mm512_maskz_div_ps(below, _mm512_set1_ps(1.0f), sum);
      for (int64_t k = 0; k < kend; k += 2)
        _mm512_storeu_si512(Pw + k / 2 * kChunk + j,
                            pair_words(_mm512_mul_ps(_mm512_loadu_ps(Sj + k * kChunk), inv),
                                       _mm512_mul_ps(_mm512_loadu_ps(Sj + (k + 1) * kChunk), inv)));
      // O = P v
      queries_product(amx.on, Pw + j, kend / 2, at<uint32_t>(buf, b.prow), Tp / 2, hs / 16,
                      at<uint32_t>(buf, b.vp), hs, O, t0);
      if (t0 < T) {
        const int64_t m = std::min(kTile, T - t0);
        unpack(out ? out + t0 * C : nullptr, out16 ? out16 + t0 * C : nullptr, O, m, hs, C);
      }
      for (int64_t i = 0; i < 16 && t0 + i < T; ++i) lse[t0 + i] = m16[i] + std::log(s16[i]);
    }
  }
}

void attn_bf16_backward_head(unsigned char* buf, QkvRows qkv, const float* dout, const float* lse,
                             int T_, int C_, int hs_, float* dqkv, uint16_t* dqkv16) {
  const Bufs b(T_, hs_);
  const int64_t T = T_, C = C_, C3 = 3 * C, hs = hs_, Tp = b.Tp, nvh = hs / 16;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  {
    PackOut o[3];
    o[0].tr = at<uint32_t>(buf, b.qt);
    o[0].pairs = at<uint32_t>(buf, b.qp);
    o[1].rows = at<uint16_t>(buf, b.kr);
    o[1].pairs = at<uint32_t>(buf, b.kp);
    o[2].rows = at<uint16_t>(buf, b.vr);
    pack_qkv(qkv, o, C, T, Tp, hs);
    PackOut d;
    d.tr = at<uint32_t>(buf, b.dt);
    d.pairs = at<uint32_t>(buf, b.dp);
    pack_head(1, &dout, &d, C, T, Tp, hs);
  }
  const AmxScope amx(use_amx());
  float *S = at<float>(buf, b.s), *G = at<float>(buf, b.g), *O = at<float>(buf, b.o);
  uint32_t* dSw = at<uint32_t>(buf, b.pw);
  uint16_t *Pr = at<uint16_t>(buf, b.pr), *dSr = at<uint16_t>(buf, b.dsr);
  float *dK = at<float>(buf, b.dk), *dV = at<float>(buf, b.dv);
  const __m512 sc = _mm512_set1_ps(scale);
  for (int64_t q0 = 0; q0 < Tp; q0 += kChunk) {
    const int64_t nq = std::min(kChunk, Tp - q0), q1 = q0 + nq;
    scores_t(amx.on, at<uint32_t>(buf, b.kr), at<uint32_t>(buf, b.qt), S, q0, nq, Tp, hs);  // S^T
    scores_t(amx.on, at<uint32_t>(buf, b.vr), at<uint32_t>(buf, b.dt), G, q0, nq, Tp, hs);  // dP^T
    for (int64_t j = 0; j < nq; j += 16) {
      const int64_t t0 = q0 + j, kend = t0 + 16;
      const __mmask16 below = lanes_below(t0, T);
      const __m512 l = _mm512_maskz_loadu_ps(below, lse + t0);
      float *Sj = S + j, *Gj = G + j;
      __m512 dot = _mm512_setzero_ps();
      for (int64_t k = 0; k < kend; ++k) {  // P = exp(scale s - lse), rowsum(P dP)
        const __m512 p =
            _mm512_maskz_mov_ps(causal_lanes(k, t0, below),
                                exp512(_mm512_fmsub_ps(_mm512_loadu_ps(Sj + k * kChunk), sc, l)));
        _mm512_storeu_ps(Sj + k * kChunk, p);
        dot = _mm512_fmadd_ps(p, _mm512_loadu_ps(Gj + k * kChunk), dot);
      }
      for (int64_t k = 0; k < kend; k += 2) {  // dS = P (dP - rowsum) scale, keys in pairs
        __m512 ds[2];
        for (int u = 0; u < 2; ++u) {
          const int64_t row = (k + u) * kChunk;
          const __m512 p = _mm512_loadu_ps(Sj + row);
          ds[u] =
              _mm512_mul_ps(_mm512_mul_ps(p, _mm512_sub_ps(_mm512_loadu_ps(Gj + row), dot)), sc);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(Pr + row + j), to_bh16(p));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dSr + row + j), to_bh16(ds[u]));
        }
        _mm512_storeu_si512(dSw + k / 2 * kChunk + j, pair_words(ds[0], ds[1]));
      }
      // dQ of queries t0..t0+15 = dS k over keys 0..kend-1
      queries_product(amx.on, dSw + j, kend / 2, at<uint32_t>(buf, b.prow), Tp / 2, nvh,
                      at<uint32_t>(buf, b.kp), hs, O, t0);
      if (t0 < T) {
        const int64_t m = std::min(kTile, T - t0);
        unpack(dqkv ? dqkv + t0 * C3 : nullptr, dqkv16 ? dqkv16 + t0 * C3 : nullptr, O, m, hs, C3);
      }
    }
    // keys 0..q1-1: dV += P^T dO, dK += dS^T q over this chunk's queries; key block k0 needs
    // the queries from k0 on (P and dS of earlier ones are zero, or were not written). A key
    // block first met in this chunk is assigned, not added to.
    const uint32_t* Pw = reinterpret_cast<const uint32_t*>(Pr);
    const uint32_t* dSrw = reinterpret_cast<const uint32_t*>(dSr);
    for (int64_t k0 = 0; k0 < q1; k0 += kTile) {
      const int64_t p0 = (std::max(k0, q0) - q0) / 2, p1 = nq / 2;
      const bool acc = k0 < q0;
      gemm16(amx.on, nvh, Pw + k0 * kChunk / 2, kChunk / 2, at<uint32_t>(buf, b.dp) + q0 / 2 * hs,
             hs, p0, p1, dV + k0 * hs, hs, acc, k0 - q0);
      gemm16(amx.on, nvh, dSrw + k0 * kChunk / 2, kChunk / 2, at<uint32_t>(buf, b.qp) + q0 / 2 * hs,
             hs, p0, p1, dK + k0 * hs, hs, acc, k0 - q0);
    }
  }
  unpack(dqkv ? dqkv + C : nullptr, dqkv16 ? dqkv16 + C : nullptr, dK, T, hs, C3);
  unpack(dqkv ? dqkv + 2 * C : nullptr, dqkv16 ? dqkv16 + 2 * C : nullptr, dV, T, hs, C3);
}

#else  // no AVX512_BF16: attention.cpp never calls the kernels (attn_bf16_supported is false)

bool attn_bf16_supported(int) { return false; }
size_t attn_bf16_head_bytes(int, int) { return 0; }
void attn_bf16_forward_head(unsigned char*, QkvRows, int, int, int, float*, uint16_t*, float*) {
  throw std::logic_error("attn_bf16_forward_head: built without AVX512_BF16");
}
void attn_bf16_backward_head(unsigned char*, QkvRows, const float*, const float*, int, int, int,
                             float*, uint16_t*) {
  throw std::logic_error("attn_bf16_backward_head: built without AVX512_BF16");
}

#endif

}  // namespace gt::cpu
