// backend/cuda/kernels_attention.cu: causal self-attention of the CUDA backend.
//   - The flash form (FlashAttention-2, Dao 2023) for bf16/fp16 operands and head sizes 32, 64
//     and 128: tiles of 64 queries and 64 keys in shared memory, products on the
//     tensor cores (mma.cuh), the online softmax (Milakov & Gimelshein 2018) in registers, the
//     log-sum-exp kept for the backward, which recomputes the probabilities; the backward in
//     two kernels (dK and dV over the queries of a key tile, then dQ over the keys of a query
//     tile), so every gradient element is written by one warp: no atomics, deterministic.
//   - A thread per row on CUDA cores (kernel_math.h's row functions) for fp32, for the
//     unfused form with its (B,NH,T,T) probability matrix, and for other head sizes.
// Q, K and V are read from qkv (B,T,3C) in f32 and rounded to 16 bits as they enter shared
// memory, or, under bf16, from the qkv product's bf16 output as they are (16-byte copies: half
// the bytes, no conversion, the same values). Launch shapes: kernel_configs.h. Compiled by nvcc
// and, on the SIMT runtime, by the host compiler (kernels_attention_emu.cpp).
#include <fmt/format.h>

#include "backend/cuda/flash_tiles.cuh"
#include "backend/cuda/kernel_configs.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "core/error.h"

namespace gt::cuda_kernels {
#if defined(__CUDACC__)
using Kernels = DeviceKernels;
#else
using Kernels = HostKernels;
#endif
namespace {
namespace hot {}
using namespace hot;  // the kernels the resource gate holds to no spills, no stack frame
namespace cfg = configs;
namespace m = gt::cuda_math;

// ---- the CUDA-core forms ---------------------------------------------------------------------
template <int HS>
__global__ void attention_forward_rows_kernel(float* o32, uint16_t* o16, float* lse, float* att,
                                              const float* qkv, m::AttnShape sh) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < int64_t(sh.B) * sh.NH * sh.T)
    m::attention_forward_row<HS>(r, o32, o16, lse, att, qkv, sh);
}
template <int HS>
__global__ void attention_delta_rows_kernel(float* delta, const float* dout, const float* qkv,
                                            const float* att, const float* lse, const float* out32,
                                            const uint16_t* out16, m::AttnShape sh) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < int64_t(sh.B) * sh.NH * sh.T)
    m::attention_delta_row<HS>(r, delta, dout, qkv, att, lse, out32, out16, sh);
}
template <int HS>
__global__ void attention_dq_rows_kernel(float* d32, uint16_t* d16, const float* dout,
                                         const float* qkv, const float* att, const float* lse,
                                         const float* delta, m::AttnShape sh) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < int64_t(sh.B) * sh.NH * sh.T)
    m::attention_dq_row<HS>(r, d32, d16, dout, qkv, att, lse, delta, sh);
}
template <int HS>
__global__ void attention_dkv_rows_kernel(float* d32, uint16_t* d16, const float* dout,
                                          const float* qkv, const float* att, const float* lse,
                                          const float* delta, m::AttnShape sh) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < int64_t(sh.B) * sh.NH * sh.T)
    m::attention_dkv_row<HS>(r, d32, d16, dout, qkv, att, lse, delta, sh);
}

// ---- the flash form ---------------------------------------------------------------------------
using namespace flash_tiles;  // R, kThreads, to16, the tile loads (flash_tiles.cuh)
/// log2(e): the softmax's exponentials are exp2 of scores pre-multiplied by it (one FFMA and
/// one MUFU.EX2 an element, as FlashAttention-2 does).
constexpr float kLog2e = 1.4426950408889634f;
/// 0, as a value the compiler cannot know: a tile's address plus it, taken at the top of a
/// loop's iteration, keeps the fragment addresses derived from the tile (one per ldmatrix, each
/// its own register) from being computed once before the loop and held across it. With them
/// held, ptxas spilled (the forward at head size 32 on sm_90: 96 registers and 44 bytes of
/// spill stores); computed in the iteration, each is the tile's address plus a constant.
__device__ __forceinline__ int opaque_zero() {
  int z = 0;
#if defined(__CUDA_ARCH__)
  asm volatile("" : "+r"(z));
#endif
  return z;
}
/// The fragment loads below hand ldmatrix 16-byte aligned rows: a tile row is S = HS + 8
/// values (a multiple of 8, 16 bytes), the columns they start at are multiples of 8, and every
/// tile starts R * S values after the last one from the 16-byte aligned dynamic shared memory
/// (the kv kernel's f32 Ls and Es come after its four tiles; no ldmatrix reads them).
/// The A fragment (mma.cuh) of rows [row, row + 16) and columns [col, col + 16) of a tile
/// (row-major, stride S): one ldmatrix.x4, lane l addressing row row + l % 16 at column
/// col + 8 (l / 16), so that a[0..3] are the 8 x 8 matrices at rows +0, +8, +0, +8 and
/// columns +0, +0, +8, +8 (PTX ISA, "Matrix Fragments for mma.m16n8k16").
template <int S>
__device__ __forceinline__ void frag_a(uint32_t* a, const uint16_t* tile, int row, int col) {
  const int l = threadIdx.x % 32;
  ldmatrix_x4(a, tile + (row + l % 16) * S + col + l / 16 * 8);
}
/// The B fragments (16 x 8) of two adjacent n-tiles, b[0..1] for columns [n0, n0 + 8) and
/// b[2..3] for [n0 + 8, n0 + 16), whose element (k, n) is tile[n0 + n][k0 + k]: the tile's
/// rows are B's columns (a product with a tile's transpose). One ldmatrix.x4 of the matrices
/// at tile rows n0, n0, n0 + 8, n0 + 8 and columns k0, k0 + 8, k0, k0 + 8.
template <int S>
__device__ __forceinline__ void frag_b_rows2(uint32_t* b, const uint16_t* tile, int n0, int k0) {
  const int l = threadIdx.x % 32;
  ldmatrix_x4(b, tile + (n0 + l % 8 + l / 16 * 8) * S + k0 + l / 8 % 2 * 8);
}
/// The B fragments of two adjacent n-tiles (b[0..1]: n0, b[2..3]: n0 + 8) whose element
/// (k, n) is tile[k0 + k][n0 + n] (a product with the tile). One ldmatrix.x4.trans of the
/// matrices at tile rows k0, k0 + 8, k0, k0 + 8 and columns n0, n0, n0 + 8, n0 + 8.
template <int S>
__device__ __forceinline__ void frag_b_cols2(uint32_t* b, const uint16_t* tile, int k0, int n0) {
  const int l = threadIdx.x % 32;
  ldmatrix_x4_trans(b, tile + (k0 + l % 16) * S + n0 + l / 16 * 8);
}
/// The A fragment (16 x 16, k = 16 of the 64 columns) from a warp's 16 x 64 f32 accumulator
/// tiles acc[8][4] (the accumulator layout of two n-tiles is the A layout of one k-step).
template <bool kF16>
__device__ __forceinline__ void frag_a_acc(uint32_t* a, const float (*acc)[4], int kk) {
  a[0] = pack16x2(to16<kF16>(acc[2 * kk][0]), to16<kF16>(acc[2 * kk][1]));
  a[1] = pack16x2(to16<kF16>(acc[2 * kk][2]), to16<kF16>(acc[2 * kk][3]));
  a[2] = pack16x2(to16<kF16>(acc[2 * kk + 1][0]), to16<kF16>(acc[2 * kk + 1][1]));
  a[3] = pack16x2(to16<kF16>(acc[2 * kk + 1][2]), to16<kF16>(acc[2 * kk + 1][3]));
}
/// Sum or maximum over the 4 lanes that hold one accumulator row (lanes 4g .. 4g+3).
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  return v + __shfl_xor_sync(kFullMask, v, 2);
}
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}
/// The stores of a 16 x HS accumulator (rows r0 + g and r0 + g + 8 of lane (g, t)) into a
/// (B,T,...) tensor: row t of batch b at out + (b*T + t)*stride, columns [0, HS), each value
/// times f; rows >= T skipped.
template <int HS, typename TOut>
__device__ __forceinline__ void store_acc(TOut* out, int64_t stride, int r0, int T,
                                          const float (*acc)[4], float f0, float f1) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  GT_UNROLL
  for (int nt = 0; nt < HS / 8; ++nt) GT_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int r = r0 + g + 8 * h;
    if (r >= T) continue;
    const float f = h ? f1 : f0;
    TOut* p = out + int64_t(r) * stride + nt * 8 + 2 * t;
    p[0] = from_f<TOut>(acc[nt][2 * h] * f);
    p[1] = from_f<TOut>(acc[nt][2 * h + 1] * f);
  }
}

/// Forward: out (B,T,C) rows of queries [64 blockIdx.x, +64) of head blockIdx.y, batch
/// blockIdx.z; lse (B,NH,T).
namespace hot {
template <int HS, bool kF16, typename TOut, typename TQ>
__global__ void __launch_bounds__(128)
    flash_forward_kernel(TOut* __restrict__ out, float* __restrict__ lse,
                         const TQ* __restrict__ qkv, int T, int C, int NH) {
  constexpr int S = HS + 8;
  GT_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t *Qs = smem, *Ks = Qs + R * S, *Vs = Ks + R * S;
  const int q0 = blockIdx.x * R, h = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int64_t stride = 3 * int64_t(C);
  const TQ* base = qkv + int64_t(b) * T * stride + h * HS;
  const float scale2 = kLog2e / sqrtf(float(HS));  // scores in log2 units
  load_tile<HS, kF16>(Qs, base, q0, T, stride);
  float o[HS / 8][4] = {};
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  const int rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  const int last = (q0 + R - 1 < T - 1 ? q0 + R - 1 : T - 1) / R;
  for (int kt = 0; kt <= last; ++kt) {
    __syncthreads();  // every warp is done with the last K and V tiles
    load_tile_pair<HS, kF16, kPairBatch<HS>>(Ks, base + C, stride, Vs, base + 2 * C, stride, kt * R,
                                             T);
    __syncthreads();
    const int z = opaque_zero();
    const uint16_t *Qw = Qs + z, *Kw = Ks + z, *Vw = Vs + z;
    float s[8][4] = {};
    GT_UNROLL
    for (int kk = 0; kk < HS / 16; ++kk) {
      uint32_t a[4];
      frag_a<S>(a, Qw, warp * 16, kk * 16);
      GT_UNROLL
      for (int nt = 0; nt < 8; nt += 2) {
        uint32_t bb[4];
        frag_b_rows2<S>(bb, Kw, nt * 8, kk * 16);
        mma_16816<kF16>(s[nt], a, bb);
        mma_16816<kF16>(s[nt + 1], a, bb + 2);
      }
    }
    float mx[2] = {mrow[0], mrow[1]};
    GT_UNROLL
    for (int nt = 0; nt < 8; ++nt) GT_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int key = kt * R + nt * 8 + 2 * t + (i & 1), row = rows[i >> 1];
      const float v = key > row || key >= T ? -INFINITY : s[nt][i] * scale2;
      s[nt][i] = v;
      mx[i >> 1] = fmaxf(mx[i >> 1], v);
    }
    float corr[2];
    GT_UNROLL
    for (int r = 0; r < 2; ++r) {
      mx[r] = quad_max(mx[r]);
      corr[r] = exp2f(mrow[r] - mx[r]);  // 0 on the first tile (mrow = -inf)
      mrow[r] = mx[r];
      lrow[r] *= corr[r];
    }
    GT_UNROLL
    for (int nt = 0; nt < 8; ++nt) GT_UNROLL
    for (int i = 0; i < 4; ++i) {
      const float p = exp2f(s[nt][i] - mx[i >> 1]);
      s[nt][i] = p;
      lrow[i >> 1] += p;
    }
    GT_UNROLL
    for (int nt = 0; nt < HS / 8; ++nt) GT_UNROLL
    for (int i = 0; i < 4; ++i) o[nt][i] *= corr[i >> 1];
    GT_UNROLL
    for (int kk = 0; kk < R / 16; ++kk) {
      uint32_t a[4];
      frag_a_acc<kF16>(a, s, kk);
      GT_UNROLL
      for (int nt = 0; nt < HS / 8; nt += 2) {
        uint32_t bb[4];
        frag_b_cols2<S>(bb, Vw, kk * 16, nt * 8);
        mma_16816<kF16>(o[nt], a, bb);
        mma_16816<kF16>(o[nt + 1], a, bb + 2);
      }
    }
  }
  const float l0 = quad_sum(lrow[0]), l1 = quad_sum(lrow[1]);
  store_acc<HS>(out + int64_t(b) * T * C + h * HS, C, q0 + warp * 16, T, o, 1.0f / l0, 1.0f / l1);
  if (t == 0) {
    float* L = lse + (int64_t(b) * NH + h) * T;
    // the log-sum-exp in natural units: max / log2(e) + log(sum)
    if (rows[0] < T) L[rows[0]] = mrow[0] / kLog2e + logf(l0);
    if (rows[1] < T) L[rows[1]] = mrow[1] / kLog2e + logf(l1);
  }
}
}  // namespace hot

/// delta[(b,h,t)] = dout . out over the head's channels: a warp per row.
namespace hot {
template <typename TOut>
__global__ void flash_delta_kernel(float* __restrict__ delta, const float* __restrict__ dout,
                                   const TOut* __restrict__ out, int64_t rows, int T, int C, int NH,
                                   int hs) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp
  const int lane = threadIdx.x % 32;
  const int t = int(row % T), h = int((row / T) % NH);
  const int64_t b = row / (int64_t(T) * NH);
  const int64_t o = (b * T + t) * C + int64_t(h) * hs;
  float s = 0.f;
  for (int d = lane; d < hs; d += 32) s += dout[o + d] * to_f(out[o + d]);
  s = warp_sum(s);
  if (lane == 0) delta[row] = s;
}
}  // namespace hot

/// The blocks per multiprocessor the kv kernel's launch bounds ask of ptxas: 2 at head sizes 64
/// and 128 (up to 255 registers: without a minimum, ptxas aimed at 3 blocks at head size 64 on
/// sm_90, 168 registers, and spilled), 3 at 32 (up to 168: with 4, sm_80 spilled at 128).
template <int HS>
constexpr int kKvBlocksPerSm = HS == 32 ? 3 : 2;
/// dK and dV of keys [64 blockIdx.x, +64) of head blockIdx.y, batch blockIdx.z, over the queries
/// at and after them (causal): a warp per 16 keys.
namespace hot {
template <int HS, bool kF16, typename TD, typename TQ>
__global__ void __launch_bounds__(128, kKvBlocksPerSm<HS>)
    flash_backward_kv_kernel(TD* __restrict__ dqkv, const float* __restrict__ dout,
                             const TQ* __restrict__ qkv, const float* __restrict__ lse,
                             const float* __restrict__ delta, int T, int C, int NH) {
  constexpr int S = HS + 8;
  GT_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t *Ks = smem, *Vs = Ks + R * S, *Qs = Vs + R * S, *Ds = Qs + R * S;
  float* Ls = reinterpret_cast<float*>(Ds + R * S);
  float* Es = Ls + R;
  const int k0 = blockIdx.x * R, h = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int64_t stride = 3 * int64_t(C);
  const TQ* base = qkv + int64_t(b) * T * stride + h * HS;
  const float* dbase = dout + int64_t(b) * T * C + h * HS;
  const float* L = lse + (int64_t(b) * NH + h) * T;
  const float* E = delta + (int64_t(b) * NH + h) * T;
  const float scale = 1.0f / sqrtf(float(HS)), scale2 = scale * kLog2e;
  load_tile_pair<HS, kF16, kPairBatch<HS>>(Ks, base + C, stride, Vs, base + 2 * C, stride, k0, T);
  float dk[HS / 8][4] = {}, dv[HS / 8][4] = {};
  const int keys[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
  for (int qt = blockIdx.x; qt * R < T; ++qt) {
    const int q0 = qt * R;
    __syncthreads();
    load_tile_pair<HS, kF16, kPairBatch<HS>>(Qs, base, stride, Ds, dbase, C, q0, T);
    for (int i = threadIdx.x; i < R; i += blockDim.x) {
      Ls[i] = q0 + i < T ? L[q0 + i] * kLog2e : 0.f;  // in log2 units
      Es[i] = q0 + i < T ? E[q0 + i] : 0.f;
    }
    __syncthreads();
    const int z = opaque_zero();
    const uint16_t *Kw = Ks + z, *Vw = Vs + z, *Qw = Qs + z, *Dw = Ds + z;
    // S^T = K_w Q^T and dP^T = V_w dO^T (16 keys x 64 queries)
    float st[8][4] = {}, dpt[8][4] = {};
    GT_UNROLL
    for (int kk = 0; kk < HS / 16; ++kk) {
      uint32_t ak[4], av[4];
      frag_a<S>(ak, Kw, warp * 16, kk * 16);
      frag_a<S>(av, Vw, warp * 16, kk * 16);
      GT_UNROLL
      for (int nt = 0; nt < 8; nt += 2) {
        uint32_t bq[4], bd[4];
        frag_b_rows2<S>(bq, Qw, nt * 8, kk * 16);
        mma_16816<kF16>(st[nt], ak, bq);
        mma_16816<kF16>(st[nt + 1], ak, bq + 2);
        frag_b_rows2<S>(bd, Dw, nt * 8, kk * 16);
        mma_16816<kF16>(dpt[nt], av, bd);
        mma_16816<kF16>(dpt[nt + 1], av, bd + 2);
      }
    }
    // P^T and dS^T = P^T (dP^T - delta)
    GT_UNROLL
    for (int nt = 0; nt < 8; ++nt) GT_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int qi = nt * 8 + 2 * t + (i & 1), q = q0 + qi, key = keys[i >> 1];
      const float p = q >= T || key > q ? 0.f : exp2f(st[nt][i] * scale2 - Ls[qi]);
      st[nt][i] = p;
      dpt[nt][i] = p * (dpt[nt][i] - Es[qi]);
    }
    // dV += P^T dO and dK += dS^T Q (the scale at the end)
    GT_UNROLL
    for (int kk = 0; kk < R / 16; ++kk) {
      uint32_t ap[4], ads[4];
      frag_a_acc<kF16>(ap, st, kk);
      frag_a_acc<kF16>(ads, dpt, kk);
      GT_UNROLL
      for (int nt = 0; nt < HS / 8; nt += 2) {
        uint32_t bd[4], bq[4];
        frag_b_cols2<S>(bd, Dw, kk * 16, nt * 8);
        mma_16816<kF16>(dv[nt], ap, bd);
        mma_16816<kF16>(dv[nt + 1], ap, bd + 2);
        frag_b_cols2<S>(bq, Qw, kk * 16, nt * 8);
        mma_16816<kF16>(dk[nt], ads, bq);
        mma_16816<kF16>(dk[nt + 1], ads, bq + 2);
      }
    }
  }
  TD* d = dqkv + int64_t(b) * T * stride + h * HS;
  store_acc<HS>(d + C, stride, k0 + warp * 16, T, dk, scale, scale);
  store_acc<HS>(d + 2 * C, stride, k0 + warp * 16, T, dv, 1.0f, 1.0f);
}
}  // namespace hot

/// dQ of queries [64 blockIdx.x, +64) over the keys at and before them: a warp per 16 queries.
namespace hot {
template <int HS, bool kF16, typename TD, typename TQ>
__global__ void __launch_bounds__(128)
    flash_backward_q_kernel(TD* __restrict__ dqkv, const float* __restrict__ dout,
                            const TQ* __restrict__ qkv, const float* __restrict__ lse,
                            const float* __restrict__ delta, int T, int C, int NH) {
  constexpr int S = HS + 8;
  GT_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t *Qs = smem, *Ds = Qs + R * S, *Ks = Ds + R * S, *Vs = Ks + R * S;
  const int q0 = blockIdx.x * R, h = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int64_t stride = 3 * int64_t(C);
  const TQ* base = qkv + int64_t(b) * T * stride + h * HS;
  const float* L = lse + (int64_t(b) * NH + h) * T;
  const float* E = delta + (int64_t(b) * NH + h) * T;
  const float scale = 1.0f / sqrtf(float(HS)), scale2 = scale * kLog2e;
  load_tile_pair<HS, kF16, kPairBatch<HS>>(Qs, base, stride, Ds, dout + int64_t(b) * T * C + h * HS,
                                           C, q0, T);
  const int rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  float lr[2], er[2];
  for (int r = 0; r < 2; ++r) {
    lr[r] = rows[r] < T ? L[rows[r]] * kLog2e : 0.f;  // in log2 units
    er[r] = rows[r] < T ? E[rows[r]] : 0.f;
  }
  float dq[HS / 8][4] = {};
  const int last = (q0 + R - 1 < T - 1 ? q0 + R - 1 : T - 1) / R;
  for (int kt = 0; kt <= last; ++kt) {
    __syncthreads();
    load_tile_pair<HS, kF16, kPairBatch<HS>>(Ks, base + C, stride, Vs, base + 2 * C, stride, kt * R,
                                             T);
    __syncthreads();
    const int z = opaque_zero();
    const uint16_t *Qw = Qs + z, *Dw = Ds + z, *Kw = Ks + z, *Vw = Vs + z;
    float s[8][4] = {}, dp[8][4] = {};
    GT_UNROLL
    for (int kk = 0; kk < HS / 16; ++kk) {
      uint32_t aq[4], ad[4];
      frag_a<S>(aq, Qw, warp * 16, kk * 16);
      frag_a<S>(ad, Dw, warp * 16, kk * 16);
      GT_UNROLL
      for (int nt = 0; nt < 8; nt += 2) {
        uint32_t bk[4], bv[4];
        frag_b_rows2<S>(bk, Kw, nt * 8, kk * 16);
        frag_b_rows2<S>(bv, Vw, nt * 8, kk * 16);
        mma_16816<kF16>(s[nt], aq, bk);
        mma_16816<kF16>(s[nt + 1], aq, bk + 2);
        mma_16816<kF16>(dp[nt], ad, bv);
        mma_16816<kF16>(dp[nt + 1], ad, bv + 2);
      }
    }
    GT_UNROLL
    for (int nt = 0; nt < 8; ++nt) GT_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int key = kt * R + nt * 8 + 2 * t + (i & 1), row = rows[i >> 1];
      const float p =
          key > row || key >= T || row >= T ? 0.f : exp2f(s[nt][i] * scale2 - lr[i >> 1]);
      dp[nt][i] = p * (dp[nt][i] - er[i >> 1]);
    }
    GT_UNROLL
    for (int kk = 0; kk < R / 16; ++kk) {
      uint32_t a[4];
      frag_a_acc<kF16>(a, dp, kk);
      GT_UNROLL
      for (int nt = 0; nt < HS / 8; nt += 2) {
        uint32_t bk[4];
        frag_b_cols2<S>(bk, Kw, kk * 16, nt * 8);
        mma_16816<kF16>(dq[nt], a, bk);
        mma_16816<kF16>(dq[nt + 1], a, bk + 2);
      }
    }
  }
  store_acc<HS>(dqkv + int64_t(b) * T * stride + h * HS, stride, q0 + warp * 16, T, dq, scale,
                scale);
}
}  // namespace hot

// ---- dispatch ------------------------------------------------------------------------------
/// Whether the flash form takes this head size and these pointers (16-byte rows: C a multiple
/// of 4 f32 values, or of 8 bf16 ones). Head sizes 32, 64 (every GPT-2 size) and 128 are
/// compiled; others take the CUDA-core form.
bool flash_ok(int hs, const float* qkv, const uint16_t* qkv16, int C) {
  const void* p = qkv16 ? static_cast<const void*>(qkv16) : qkv;
  return (hs == 32 || hs == 64 || hs == 128) && C % (qkv16 ? 8 : 4) == 0 &&
         reinterpret_cast<uintptr_t>(p) % 16 == 0;
}
template <typename F>
void with_head_size(int hs, F f) {
  switch (hs) {
    case 32:
      return f(std::integral_constant<int, 32>{});
    case 64:
      return f(std::integral_constant<int, 64>{});
    default:
      return f(std::integral_constant<int, 128>{});
  }
}
template <int HS>
void rows_forward(Kernels::Stream s, float* o32, uint16_t* o16, float* lse, float* att,
                  const float* qkv, m::AttnShape sh) {
  simt::launch(s, cfg::attention_rows(int64_t(sh.B) * sh.NH * sh.T), "attention_forward",
               &attention_forward_rows_kernel<HS>, o32, o16, lse, att, qkv, sh);
}
template <int HS>
void rows_backward(Kernels::Stream s, float* d32, uint16_t* d16, const float* dout,
                   const float* qkv, const float* att, const float* lse, const float* out32,
                   const uint16_t* out16, float* delta, m::AttnShape sh) {
  const auto lc = cfg::attention_rows(int64_t(sh.B) * sh.NH * sh.T);
  simt::launch(s, lc, "attention_backward (delta)", &attention_delta_rows_kernel<HS>, delta, dout,
               qkv, att, lse, out32, out16, sh);
  simt::launch(s, lc, "attention_backward (dq)", &attention_dq_rows_kernel<HS>, d32, d16, dout, qkv,
               att, lse, static_cast<const float*>(delta), sh);
  simt::launch(s, lc, "attention_backward (dk, dv)", &attention_dkv_rows_kernel<HS>, d32, d16, dout,
               qkv, att, lse, static_cast<const float*>(delta), sh);
}
template <typename F>
void with_row_head_size(int hs, F f) {
  switch (hs) {
    case 32:
      return f(std::integral_constant<int, 32>{});
    case 64:
      return f(std::integral_constant<int, 64>{});
    case 128:
      return f(std::integral_constant<int, 128>{});
    default:
      return f(std::integral_constant<int, 0>{});
  }
}

}  // namespace

bool Kernels::flash_reads_qkv16(int C, int NH, const uint16_t* qkv16, int flash) {
  return flash == 1 && NH > 0 && C % NH == 0 && flash_ok(C / NH, nullptr, qkv16, C);
}

void Kernels::attention_forward(Stream s, float* o32, uint16_t* o16, float* lse, float* att,
                                const float* qkv, const uint16_t* qkv16, int B, int T, int C,
                                int NH, int flash) {
  if (B <= 0 || T <= 0) return;
  const m::AttnShape sh{B, T, C, NH};
  const int hs = C / NH;
  check(!qkv16 || (o16 && !att && lse && flash_reads_qkv16(C, NH, qkv16, flash)),
        "attention_forward: a bf16 qkv is read by the flash form alone, with a bf16 output");
  if (flash && !att && lse && flash_ok(hs, qkv, qkv16, C)) {
    const bool f16 = flash == 2;
    with_head_size(hs, [&](auto H) {
      constexpr int HS = decltype(H)::value;
      const auto lc = cfg::flash_forward(B, T, NH, HS);
#define GT_FLASH_FWD(F16, TOut, o, TQ, q)                                                       \
  simt::launch(s, lc, "attention_forward (flash)", &flash_forward_kernel<HS, F16, TOut, TQ>, o, \
               lse, q, T, C, NH)
      if (qkv16)
        GT_FLASH_FWD(false, uint16_t, o16, uint16_t, qkv16);  // the bf16 qkv of bf16 activations
      else if (f16)
        GT_FLASH_FWD(true, float, o32, float, qkv);  // bf16 tensors belong to precision bf16
      else if (o16)
        GT_FLASH_FWD(false, uint16_t, o16, float, qkv);
      else
        GT_FLASH_FWD(false, float, o32, float, qkv);
#undef GT_FLASH_FWD
    });
    return;
  }
  with_row_head_size(
      hs, [&](auto H) { rows_forward<decltype(H)::value>(s, o32, o16, lse, att, qkv, sh); });
}

void Kernels::attention_backward(Stream s, float* d32, uint16_t* d16, const float* dout,
                                 const float* qkv, const uint16_t* qkv16, const float* att,
                                 const float* lse, const float* out32, const uint16_t* out16,
                                 float* delta, int B, int T, int C, int NH, int flash) {
  if (B <= 0 || T <= 0) return;
  const m::AttnShape sh{B, T, C, NH};
  const int hs = C / NH;
  check(
      !qkv16 || (d16 && !att && lse && (out32 || out16) && flash_reads_qkv16(C, NH, qkv16, flash)),
      "attention_backward: a bf16 qkv is read by the flash form alone, with a bf16 dqkv");
  if (flash && !att && lse && (out32 || out16) && flash_ok(hs, qkv, qkv16, C)) {
    const bool f16 = flash == 2;
    const auto dl = cfg::attention_delta(int64_t(B) * NH * T);
    if (out16)
      simt::launch(s, dl, "attention_backward (delta)", &flash_delta_kernel<uint16_t>, delta, dout,
                   out16, int64_t(B) * NH * T, T, C, NH, hs);
    else
      simt::launch(s, dl, "attention_backward (delta)", &flash_delta_kernel<float>, delta, dout,
                   out32, int64_t(B) * NH * T, T, C, NH, hs);
    const float* dl_c = delta;
    with_head_size(hs, [&](auto H) {
      constexpr int HS = decltype(H)::value;
      const auto kv = cfg::flash_backward_kv(B, T, NH, HS), q = cfg::flash_backward_q(B, T, NH, HS);
#define GT_FLASH_BWD(F16, TD, d, TQ, qk)                                                         \
  simt::launch(s, kv, "attention_backward (flash dk, dv)",                                       \
               &flash_backward_kv_kernel<HS, F16, TD, TQ>, d, dout, qk, lse, dl_c, T, C, NH);    \
  simt::launch(s, q, "attention_backward (flash dq)", &flash_backward_q_kernel<HS, F16, TD, TQ>, \
               d, dout, qk, lse, dl_c, T, C, NH)
      if (qkv16) {  // the bf16 qkv of bf16 activations
        GT_FLASH_BWD(false, uint16_t, d16, uint16_t, qkv16);
      } else if (f16) {  // bf16 tensors belong to precision bf16
        GT_FLASH_BWD(true, float, d32, float, qkv);
      } else if (d16) {
        GT_FLASH_BWD(false, uint16_t, d16, float, qkv);
      } else {
        GT_FLASH_BWD(false, float, d32, float, qkv);
      }
#undef GT_FLASH_BWD
    });
    return;
  }
  with_row_head_size(hs, [&](auto H) {
    rows_backward<decltype(H)::value>(s, d32, d16, dout, qkv, att, lse, out32, out16, delta, sh);
  });
}

}  // namespace gt::cuda_kernels
