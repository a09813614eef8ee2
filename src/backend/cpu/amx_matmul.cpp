#include "backend/cpu/amx_matmul.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

#if defined(__x86_64__) && defined(__linux__) && defined(__AVX512F__) && defined(__AVX512BW__)
#define GT_AMX_KERNEL 1
#include <cpuid.h>
// GCC 12 warns that masked intrinsics read an uninitialised vector (its bug 105593)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/bf16_epilogue.h"
#include "backend/cpu/dpbf16_block.h"
#include "backend/cpu/simd512.h"
#else
#define GT_AMX_KERNEL 0
#endif

namespace gt::cpu {
namespace {

std::atomic<bool> g_rows_to_first{false};  // amx_matmul_rows_to_first_thread

std::atomic<int> g_own{-1};     // -1: not decided yet (environment), 0 off, 1 on
std::atomic<int> g_vector{-1};  // the vector kernel even with AMX: -1 not decided yet, 0, 1

/// g's choice, taken from the environment the first time (while g is -1): `match` where the
/// variable `var` is set to `value`, else the opposite.
bool env_choice(std::atomic<int>& g, const char* var, const char* value, bool match) {
  int v = g.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* env = std::getenv(var);
    v = (env && std::strcmp(env, value) == 0) == match ? 1 : 0;
    g.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

bool own_enabled() { return env_choice(g_own, "GT_CPU_OWN_AMX", "0", false); }

bool vector_preferred() { return env_choice(g_vector, "GT_CPU_BF16_KERNEL", "avx512_bf16", true); }

#if GT_AMX_KERNEL
/// A 64-byte aligned buffer of the calling thread that grows and is kept (no std template is
/// instantiated inside the AMX-targeted functions below: an inline function compiled there
/// could be the copy the linker keeps for the whole program).
uint16_t* thread_buffer(int which, size_t elems) {
  struct Buf {
    void* p = nullptr;
    size_t n = 0;
    ~Buf() { std::free(p); }
  };
  static thread_local Buf bufs[4];
  Buf& b = bufs[which];
  if (b.n < elems) {
    std::free(b.p);
    b.n = (elems + 31) / 32 * 32;
    b.p = std::aligned_alloc(64, b.n * sizeof(uint16_t));
    if (!b.p)
      throw Error("amx_matmul_bf16: out of memory for a buffer of " + std::to_string(b.n * 2) +
                  " bytes");
  }
  return static_cast<uint16_t*>(b.p);
}

constexpr int64_t kMaxMc = 8;  // 32-row blocks of A per chunk: 256 rows stay in L2 across N
/// The least work of a chunk of block rows (FLOPs) a thread runs or takes from another's
/// share: when chunks were dealt to whichever thread was free, chunks of one 1-MFLOP block
/// row ran 1.02-1.06x the time of static halves inside training steps
constexpr int64_t kMinChunkFlop = int64_t{8} << 20;

bool detect_amx() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
  if (!amx_bf16 || !amx_tile) return false;
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // asm/prctl.h
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
}

// (intrinsics inside an OpenMP region's body would be compiled, by clang, into an outlined
// function without this target: each goes through a function that has it)
GT_AMX_TARGET void release_tiles() { _tile_release(); }

GT_AMX_TARGET void load_config() {
  TileConfig cfg;
  for (int i = 0; i < 8; ++i) {
    cfg.rows[i] = 16;
    cfg.colsb[i] = 64;
  }
  _tile_loadconfig(&cfg);
}

/// B into AMX's layout: for each 16-column tile nt and 32-deep step kb, 16 rows of pairs,
/// row p = (B[2p][n], B[2p+1][n]) for n in the tile, at bp + 512 (nt kt + kb); columns past N
/// are zeros. This: tile nt at step kb of B stored (N,K) (B[k][n] = b[n K + k]), whose rows n
/// hold the pairs: a 16 x 16 transpose of them.
GT_AMX_TARGET void pack_b_tile_nk(uint16_t* bp, const uint16_t* b, int64_t N, int64_t K, int64_t nt,
                                  int64_t kb) {
  const int64_t n0 = nt * 16, k0 = kb * 32;
  const __mmask16 m = lanes_below(n0, N);
  __m512i v[16];
  for (int n = 0; n < 16; ++n)
    v[n] = (m >> n) & 1 ? _mm512_loadu_si512(b + (n0 + n) * K + k0) : _mm512_setzero_si512();
  transpose16(v);
  uint16_t* d = bp + (nt * (K / 32) + kb) * 512;
  for (int p = 0; p < 16; ++p) _mm512_storeu_si512(d + p * 32, v[p]);
}

/// Both tiles of column block j (tiles 2 j and 2 j + 1) at step kb of B stored (K,N)
/// (B[k][n] = b[k N + n]), as pack_b_tile_nk lays them out: rows 2p and 2p+1 interleaved.
GT_AMX_TARGET void pack_b_pair_kn(uint16_t* bp, const uint16_t* b, int64_t N, int64_t kt, int64_t j,
                                  int64_t kb) {
  const int64_t n0 = j * 32, k0 = kb * 32;
  const __mmask32 m = lanes32_below(n0, N);
  uint16_t* d0 = bp + (2 * j * kt + kb) * 512;
  uint16_t* d1 = d0 + kt * 512;
  for (int p = 0; p < 16; ++p) {
    __m512i lo, hi;
    interleave_pairs32(b + (k0 + 2 * p) * N + n0, N, m, lo, hi);
    _mm512_storeu_si512(d0 + p * 32, lo);
    _mm512_storeu_si512(d1 + p * 32, hi);
  }
}

/// B's tiles of column blocks [j0, j1) at every step of K into bp, laid out as above.
GT_AMX_TARGET void pack_b_columns(uint16_t* bp, const uint16_t* b, int64_t N, int64_t K,
                                  bool trans_b, int64_t j0, int64_t j1) {
  const int64_t kt = K / 32;
  if (trans_b) {
    for (int64_t t = 2 * j0 * kt; t < 2 * j1 * kt; ++t) pack_b_tile_nk(bp, b, N, K, t / kt, t % kt);
    return;
  }
  for (int64_t kb = 0; kb < kt; ++kb)  // row by row of B: each row's lines read once
    for (int64_t j = j0; j < j1; ++j) pack_b_pair_kn(bp, b, N, kt, j, kb);
}

/// A thread's block rows [lo, hi) still to run, in one word (lo in the low 32 bits, hi in the
/// high), so that its owner taking from the front and another thread from the back never
/// both take the same rows. One to a cache line.
struct alignas(64) RowRange {
  std::atomic<uint64_t> v;
};

inline uint64_t pack_range(int64_t lo, int64_t hi) {
  return static_cast<uint64_t>(lo) | static_cast<uint64_t>(hi) << 32;
}

/// Up to mc block rows of r into [i0, i1): from the front (its owner) or the back; false
/// when none are left.
inline bool take_rows(RowRange& r, int64_t mc, bool front, int64_t& i0, int64_t& i1) {
  uint64_t v = r.v.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t lo = static_cast<int64_t>(v & 0xffffffffu), hi = static_cast<int64_t>(v >> 32);
    if (lo >= hi) return false;
    if (front) {
      i0 = lo;
      i1 = lo + mc < hi ? lo + mc : hi;
    } else {
      i1 = hi;
      i0 = hi - mc > lo ? hi - mc : lo;
    }
    const uint64_t nv = front ? pack_range(i1, hi) : pack_range(lo, i0);
    if (r.v.compare_exchange_weak(v, nv, std::memory_order_acq_rel, std::memory_order_relaxed))
      return true;
  }
}

/// A block whose result waits in a buffer for its epilogue (f32, 32 x 32, row stride 32).
struct Pending {
  const float* buf = nullptr;  // null: none
  int64_t r0 = 0, c0 = 0;
  bool add_bias = false;  // the bias is not in the tiles' result yet
};

/// (x + bias) * mul [+ c_old] of rows [from, to) of a pending block into C; the bias only when
/// p.add_bias (else it is in x already).
GT_AMX_TARGET void epilogue(const Pending& p, void* c, int64_t M, int64_t N, const AmxEpilogue& e,
                            int64_t from, int64_t to) {
  const float* buf = p.buf;
  const int64_t r0 = p.r0, c0 = p.c0;
  const bool add_bias = p.add_bias;
  const int64_t rows = M - r0 < to ? M - r0 : to;
  for (int64_t r = from; r < rows; ++r) {
    const int64_t row = r0 + r;
    for (int h = 0; h < 2; ++h) {
      const int64_t col = c0 + 16 * h;
      if (col >= N) break;
      store_epilogue16(c, row, col, N, lanes_below(col, N), _mm512_loadu_ps(buf + r * 32 + 16 * h),
                       add_bias, e);
    }
  }
}

/// One 32 x 32 block of C: rows 32 i, columns 32 j; ap: this block's 32 rows of A in tiles
/// (packed by pack_a), or where a_ld > 0 its first row in A stored (M,K) with rows a_ld
/// elements apart (read in place). Where the result needs an epilogue it goes to bufs[cur] and
/// becomes the pending block, whose epilogue the next block's product runs a few rows per step of k
/// (the vector unit's work beside the tiles'; run one after the other, a bf16 C cost as much as the
/// product).
GT_AMX_TARGET void block(void* c, const uint16_t* ap, const uint16_t* bp, int64_t M, int64_t N,
                         int64_t K, int64_t i, int64_t j, float* bufs, int& cur, Pending& pend,
                         const AmxEpilogue& e, int64_t a_ld) {
  const int64_t kt = K / 32, r0 = 32 * i, c0 = 32 * j;
  const uint16_t* a0 = ap;
  const uint16_t* a1 = a_ld ? a0 + 16 * a_ld : a0 + kt * 512;
  const int64_t a_step = a_ld ? 32 : 512, a_stride = a_ld ? 2 * a_ld : 64;
  const uint16_t* b0 = bp + (2 * j) * kt * 512;
  const uint16_t* b1 = b0 + kt * 512;
  // C's rows (and the multiplier's) are fetched while the tiles compute, a few rows per step
  // of k (all at once, they filled the core's line-fill buffers and stalled it): without
  // it, each product at the step's shapes waited on its stores' and multiplier's misses
  const int64_t rows = M - r0 < 32 ? M - r0 : 32;
  const int64_t cbytes = e.c_bf16 ? 2 : 4, mbytes = e.mul_bf16 ? 2 : 4;
  const char* cbase = static_cast<const char*>(c) + (r0 * N + c0) * cbytes;
  const char* mbase = e.mul ? static_cast<const char*>(e.mul) + (r0 * N + c0) * mbytes : nullptr;
  auto prefetch_rows = [&](int64_t from, int64_t to) __attribute__((always_inline)) {
    for (int64_t r = from; r < to && r < rows; ++r) {
      _mm_prefetch(cbase + r * N * cbytes, _MM_HINT_ET0);
      if (cbytes == 4) _mm_prefetch(cbase + r * N * cbytes + 64, _MM_HINT_ET0);
      if (e.dgelu)
        _mm_prefetch(reinterpret_cast<const char*>(e.dgelu + (r0 + r) * N + c0), _MM_HINT_ET0);
      if (mbase) {
        _mm_prefetch(mbase + r * N * mbytes, _MM_HINT_T0);
        if (mbytes == 4) _mm_prefetch(mbase + r * N * mbytes + 64, _MM_HINT_T0);
      }
    }
  };
  // the bias as the accumulators' start (a row read 16 times: stride 0), where the block's
  // columns are all inside N; (bias + A B) then rounds once more than oneDNN's (A B) + bias
  const bool bias_in_tiles = e.bias && c0 + 32 <= N;
  // accumulate into an f32 C: its old block as the accumulators' start, where the block is
  // whole and nothing else is applied (C_old + A B, summed on top of C_old chunk by chunk)
  const bool c_in_tiles =
      e.accumulate && !e.c_bf16 && !e.bias && !e.mul && r0 + 32 <= M && c0 + 32 <= N;
  if (c_in_tiles) {
    float* cp = static_cast<float*>(c) + r0 * N + c0;
    _tile_loadd(0, cp, N * 4);
    _tile_loadd(1, cp + 16, N * 4);
    _tile_loadd(2, cp + 16 * N, N * 4);
    _tile_loadd(3, cp + 16 * N + 16, N * 4);
  } else if (bias_in_tiles) {
    _tile_loadd(0, e.bias + c0, 0);
    _tile_loadd(1, e.bias + c0 + 16, 0);
    _tile_loadd(2, e.bias + c0, 0);
    _tile_loadd(3, e.bias + c0 + 16, 0);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t k = 0; k < kt; ++k) {
    prefetch_rows(k * 32 / kt, (k + 1) * 32 / kt);
    if (pend.buf) epilogue(pend, c, M, N, e, k * 32 / kt, (k + 1) * 32 / kt);
    _tile_loadd(4, a0 + a_step * k, a_stride);
    _tile_loadd(6, b0 + 512 * k, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(7, b1 + 512 * k, 64);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, a1 + a_step * k, a_stride);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  pend.buf = nullptr;  // its rows all went out in the loop above
  const bool plain =
      (!e.bias || bias_in_tiles) && !e.mul && !e.c_bf16 && !e.gelu && (!e.accumulate || c_in_tiles);
  if (plain && r0 + 32 <= M && c0 + 32 <= N) {
    float* cp = static_cast<float*>(c) + r0 * N + c0;
    _tile_stored(0, cp, N * 4);
    _tile_stored(1, cp + 16, N * 4);
    _tile_stored(2, cp + 16 * N, N * 4);
    _tile_stored(3, cp + 16 * N + 16, N * 4);
    return;
  }
  float* buf = bufs + cur * 32 * 32;
  _tile_stored(0, buf, 128);
  _tile_stored(1, buf + 16, 128);
  _tile_stored(2, buf + 16 * 32, 128);
  _tile_stored(3, buf + 16 * 32 + 16, 128);
  pend = {buf, r0, c0, !bias_in_tiles};
  cur ^= 1;
}

/// Rows r0 .. r0 + 32 nblocks of A into tiles: for each 16-row tile and 32-deep step, 16 rows
/// of 32 values; rows past M are zeros. A is stored (M,K), or (K,M) when trans_a: then 32
/// rows m at a time, the stored rows 2p and 2p+1 interleaved into pairs (A[2p][m],
/// A[2p+1][m]) and each tile's 16 x 16 pairs transposed.
GT_AMX_TARGET void pack_a(uint16_t* dst, const uint16_t* a, int64_t M, int64_t K, bool trans_a,
                          int64_t r0, int64_t nblocks) {
  const int64_t kt = K / 32;
  if (trans_a) {  // both 16-row tiles of a block from each stored row's 32 values
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      const int64_t m0 = r0 + 32 * blk;
      const __mmask32 m = lanes32_below(m0, M);
      for (int64_t k = 0; k < kt; ++k) {
        __m512i lo[16], hi[16];
        for (int p = 0; p < 16; ++p)
          interleave_pairs32(a + (32 * k + 2 * p) * M + m0, M, m, lo[p], hi[p]);
        transpose16(lo);
        transpose16(hi);
        uint16_t* d0 = dst + (2 * blk * kt + k) * 512;
        uint16_t* d1 = d0 + kt * 512;
        for (int r = 0; r < 16; ++r) {
          _mm512_storeu_si512(d0 + r * 32, lo[r]);
          _mm512_storeu_si512(d1 + r * 32, hi[r]);
        }
      }
    }
    return;
  }
  for (int64_t r = 0; r < 32 * nblocks; ++r) {
    uint16_t* d = dst + ((r / 16) * kt * 16 + r % 16) * 32;
    if (r0 + r >= M) {
      for (int64_t k = 0; k < kt; ++k) _mm512_storeu_si512(d + k * 512, _mm512_setzero_si512());
      continue;
    }
    const uint16_t* src = a + (r0 + r) * K;
    for (int64_t k = 0; k < kt; ++k)
      _mm512_storeu_si512(d + k * 512, _mm512_loadu_si512(src + 32 * k));
  }
}

/// The column sums of rows [r0, r0 + 32 nblocks) of A (stored (M,K), bf16), one f32 row of K
/// per 32-row block into part (block b at part + b K), each summed in row order; rows past M
/// add nothing. Called right after pack_a read the same rows (they are in L1/L2).
GT_AMX_TARGET void column_sums(float* part, const uint16_t* a, int64_t M, int64_t K, int64_t r0,
                               int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b) {
    const int64_t first = r0 + 32 * b, last = first + 32 < M ? first + 32 : M;
    for (int64_t k = 0; k < K; k += 32) {  // K % 32 == 0
      __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
      for (int64_t r = first; r < last; ++r) {
        const __m512i v = _mm512_loadu_si512(a + r * K + k);
        lo = _mm512_add_ps(lo, widen_bf16_512(_mm512_castsi512_si256(v)));
        hi = _mm512_add_ps(hi, widen_bf16_512(_mm512_extracti64x4_epi64(v, 1)));
      }
      _mm512_storeu_ps(part + b * K + k, lo);
      _mm512_storeu_ps(part + b * K + k + 16, hi);
    }
  }
}

/// Rows [i0, i1) of C's blocks in chunks of mc, columns [j0, j1), on the calling thread: each
/// chunk of A read in place or packed once into ap, and met by every column block of the range;
/// on AMX tiles, or where vec on the vector unit (dpbf16_block, its own layout of a packed A).
GT_AMX_TARGET void blocks(void* c, const uint16_t* a, const uint16_t* bp, int64_t M, int64_t N,
                          int64_t K, bool trans_a, const AmxEpilogue& e, uint16_t* ap, float* sums,
                          int64_t mc, int64_t i0, int64_t i1, int64_t j0, int64_t j1, float* bufs,
                          bool vec) {
  int cur = 0;
  Pending pend;
  for (int64_t c0 = i0; c0 < i1; c0 += mc) {
    const int64_t c1 = c0 + mc < i1 ? c0 + mc : i1;
    // A stored (M,K) is read by the tiles in place (row stride 2K bytes) where the chunk's
    // blocks are whole; the rest (a transposed A, a last partial block) is packed first
    // (a packed block is 32 K elements either way; the vector kernel's own layout,
    // dpbf16_block.h)
    const bool in_place = !trans_a && 32 * c1 <= M;
    if (!in_place) {
      if (vec)
        dpbf16_pack_a(ap, a, M, K, trans_a, 32 * c0, c1 - c0);
      else
        pack_a(ap, a, M, K, trans_a, 32 * c0, c1 - c0);
    }
    if (sums) column_sums(sums + c0 * K, a, M, K, 32 * c0, c1 - c0);
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = c0; i < c1; ++i) {
        const uint16_t* ai = in_place ? a + 32 * i * K : ap + (i - c0) * 32 * K;
        if (vec)
          dpbf16_block(c, {ai, K, !in_place && trans_a}, bp, M, N, K, i, j, e);
        else
          block(c, ai, bp, M, N, K, i, j, bufs, cur, pend, e, in_place ? K : 0);
      }
    if (pend.buf) epilogue(pend, c, M, N, e, 0, 32);
    pend.buf = nullptr;
  }
}

/// The product on the calling thread's team. Where C has fewer block rows than block columns
/// and no column sums are taken (a weight gradient: M = C's inputs, N its outputs), each
/// thread takes a range of column blocks, packs those columns of B and all of A itself, and
/// reads only what it packed (split by rows, each thread read every column of B, half of it
/// from the other core's cache), in chunks of mc block rows; otherwise B is packed once by the
/// whole team (each thread the columns it would take), each thread runs its own share of the
/// block rows (ranges[tid]) and then takes what is left of the others'. Either way each block runs
/// whole on one thread: the same bits on any team. vec: the blocks on the vector unit (no
/// tile state is configured).
GT_AMX_TARGET void run(void* c, const uint16_t* a, const uint16_t* b, int64_t M, int64_t N,
                       int64_t K, bool trans_a, bool trans_b, const AmxEpilogue& e, uint16_t* bp,
                       uint16_t* a_bufs, float* sums, int64_t mc, bool split_cols, bool vec,
                       RowRange* ranges, bool rows_to_first) {
  const int64_t nb = (N + 31) / 32, mb = (M + 31) / 32;
#pragma omp parallel
  {
    if (!vec) load_config();
    alignas(64) float bufs[2 * 32 * 32];
    uint16_t* ap = a_bufs + static_cast<int64_t>(omp_get_thread_num()) * mc * 32 * K;
    // each thread packs the columns of B it would take in a split by columns
    const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t j0 = nb * tid / nt, j1 = nb * (tid + 1) / nt;
    pack_b_columns(bp, b, N, K, trans_b, j0, j1);
    if (split_cols) {
      if (j1 > j0) blocks(c, a, bp, M, N, K, trans_a, e, ap, nullptr, mc, 0, mb, j0, j1, bufs, vec);
    } else {
      // each thread its own contiguous block rows first, in chunks of mc from the front: about
      // the rows it wrote in the op before (the step's ops split rows into contiguous equal
      // shares too; exactly where M is a multiple of 32 x the team), still in its core's
      // cache; then chunks from the back of the others' rows while any are left (a thread
      // slowed by other work on its core). Inside steps, 1.01-1.09x faster than chunks dealt
      // to whichever thread was free (docs/benchmarks.md)
      // (rows_to_first, for tests: every row in the first thread's share, which only the
      // others run, from its back, where there are others)
      const bool to_first = rows_to_first && nt > 1;
      if (to_first)
        ranges[tid].v.store(tid == 0 ? pack_range(0, mb) : 0, std::memory_order_relaxed);
      else
        ranges[tid].v.store(pack_range(mb * tid / nt, mb * (tid + 1) / nt),
                            std::memory_order_relaxed);
#pragma omp barrier
      int64_t i0, i1;
      while (!to_first && take_rows(ranges[tid], mc, true, i0, i1))
        blocks(c, a, bp, M, N, K, trans_a, e, ap, sums, mc, i0, i1, 0, nb, bufs, vec);
      for (int64_t o = 1; o < nt; ++o)
        while (take_rows(ranges[(tid + o) % nt], mc, false, i0, i1))
          blocks(c, a, bp, M, N, K, trans_a, e, ap, sums, mc, i0, i1, 0, nb, bufs, vec);
    }
    if (!vec) release_tiles();
    if (sums) {  // the blocks' partial sums in block order, once every block has run
#pragma omp barrier
#pragma omp for schedule(static)
      for (int64_t k = 0; k < K; k += 16) {
        __m512 t = _mm512_loadu_ps(e.a_col_sums + k);
        for (int64_t i = 0; i < mb; ++i) t = _mm512_add_ps(t, _mm512_loadu_ps(sums + i * K + k));
        _mm512_storeu_ps(e.a_col_sums + k, t);
      }
    }
  }
}
#endif  // GT_AMX_KERNEL

}  // namespace

bool amx_available() {
#if GT_AMX_KERNEL
  static const bool ok = detect_amx();
  return ok;
#else
  return false;
#endif
}

Bf16Kernel own_bf16_kernel() {
  if (!own_enabled()) return Bf16Kernel::none;
  if (amx_available() && !vector_preferred()) return Bf16Kernel::amx;
#if GT_AMX_KERNEL
  if (dpbf16_available()) return Bf16Kernel::avx512_bf16;
#endif
  return Bf16Kernel::none;
}

const char* bf16_kernel_name(Bf16Kernel k) {
  switch (k) {
    case Bf16Kernel::amx:
      return "own AMX";
    case Bf16Kernel::avx512_bf16:
      return "own AVX512_BF16";
    default:
      return "oneDNN";
  }
}

void prefer_vector_bf16_kernel(bool on) { g_vector.store(on ? 1 : 0, std::memory_order_relaxed); }

bool vector_bf16_kernel_preferred() { return vector_preferred(); }

void amx_matmul_rows_to_first_thread(bool on) {
  g_rows_to_first.store(on, std::memory_order_relaxed);
}

bool amx_matmul_takes(int64_t M, int64_t N, int64_t K) {
  return M > 0 && N > 0 && K > 0 && K % 32 == 0 && N * K <= kAmxMaxBElems &&
         M <= (int64_t{1} << 36) &&  // block rows fit a share's 32-bit bounds (RowRange)
         own_bf16_kernel() != Bf16Kernel::none;
}

size_t amx_matmul_workspace_bytes(int64_t max_m, int64_t max_nk, int64_t max_k, int threads) {
  if (max_nk <= 0 || own_bf16_kernel() == Bf16Kernel::none) return 0;
  return static_cast<size_t>((max_nk + 32 * max_k) + int64_t{threads} * 8 * 32 * max_k) *
             sizeof(uint16_t) +
         static_cast<size_t>((max_m + 31) / 32 * max_k) * sizeof(float) +
         static_cast<size_t>(threads) * 64;  // the threads' shares of block rows (RowRange)
}

bool own_amx_enabled() { return own_enabled() && amx_available(); }

void set_own_amx_matmul(bool on) { g_own.store(on ? 1 : 0, std::memory_order_relaxed); }

void amx_matmul_bf16(void* c, const uint16_t* a, const uint16_t* b, int64_t M, int64_t N, int64_t K,
                     bool trans_a, bool trans_b, const AmxEpilogue& e) {
  if (!amx_matmul_takes(M, N, K))
    throw Error("amx_matmul_bf16: no own bf16 product for M " + std::to_string(M) + ", N " +
                std::to_string(N) + ", K " + std::to_string(K) +
                " here (needs AMX-BF16 or AVX512_BF16, K a multiple of 32, N K at most 2^23, "
                "GT_CPU_OWN_AMX not 0)");
  if (e.accumulate && e.c_bf16) throw Error("amx_matmul_bf16: accumulate needs an f32 C");
  if (e.a_col_sums && trans_a)
    throw Error("amx_matmul_bf16: a_col_sums needs A stored (M,K) (trans_a false)");
  if (e.gelu && e.accumulate) throw Error("amx_matmul_bf16: gelu cannot accumulate into C");
  if (e.dgelu && !e.gelu) throw Error("amx_matmul_bf16: dgelu needs gelu");
#if GT_AMX_KERNEL
  const int64_t nb = (N + 31) / 32, mb = (M + 31) / 32, nt = omp_get_max_threads();
  // split by columns: chunks of at most kMaxMc block rows of A, each packed once per thread
  // and met by the thread's column blocks. Split by rows: each thread's share run, and taken
  // by others, in chunks of at least kMinChunkFlop of work (a block row of a 128-wide product
  // is about 1 MFLOP), at most half a thread's share and kMaxMc block rows
  static_assert(kMaxMc == 8, "amx_matmul_workspace_bytes counts 8 blocks of rows per thread");
  const bool split_cols = nt > 1 && mb < nb && !e.a_col_sums;
  const int64_t row_flop = 2 * 32 * (32 * nb) * K;
  const int64_t share = (mb + 2 * nt - 1) / (2 * nt);
  const int64_t mc =
      split_cols ? std::min(mb, kMaxMc)
                 : std::max<int64_t>(1, std::min({kMinChunkFlop / row_flop + 1, share, kMaxMc}));
  uint16_t* bp = thread_buffer(0, static_cast<size_t>(nb * 32 * K));
  uint16_t* a_bufs = thread_buffer(1, static_cast<size_t>(nt * mc * 32 * K));
  float* sums = e.a_col_sums
                    ? reinterpret_cast<float*>(thread_buffer(2, static_cast<size_t>(mb * K * 2)))
                    : nullptr;
  RowRange* ranges = reinterpret_cast<RowRange*>(
      thread_buffer(3, static_cast<size_t>(nt) * sizeof(RowRange) / sizeof(uint16_t)));
  for (int64_t t = 0; t < nt; ++t) new (&ranges[t]) RowRange{};
  run(c, a, b, M, N, K, trans_a, trans_b, e, bp, a_bufs, sums, mc, split_cols,
      own_bf16_kernel() == Bf16Kernel::avx512_bf16, ranges,
      g_rows_to_first.load(std::memory_order_relaxed));
#else
  (void)c, (void)a, (void)b, (void)trans_a, (void)trans_b;
#endif
}

}  // namespace gt::cpu
