// backend/cuda/flash_tiles.cuh: how the flash attention kernels (kernels_attention.cu) fill
// their shared-memory tiles: R rows of HS 16-bit values (a row S = HS + 8 values apart, for
// ldmatrix's 16-byte rows), from f32 rows rounded to bf16 or fp16 as they are loaded, or from
// 16-bit rows (the bf16 qkv of bf16 activations) copied as they are. All threads of a flash block
// (kThreads) take part; rows at or past T are zeros. Included by kernels_attention.cu alone
// (compiled by nvcc, and on the SIMT runtime by the host compiler).
#pragma once
#include <cstdint>

#include "backend/cuda/kernel_configs.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/mma.cuh"

namespace gt::cuda_kernels::flash_tiles {

constexpr int R = configs::kFlashRows;               // rows of a tile
constexpr int kThreads = 32 * configs::kFlashWarps;  // threads of a flash block

template <bool kF16>
__device__ __forceinline__ uint16_t to16(float x) {
  if constexpr (kF16)
    return f16_rn(x);
  else
    return bf16_rn(x);
}

/// The 16-bit form of a pack of 4 floats (as two 32-bit words).
template <bool kF16>
__device__ __forceinline__ uint2 to16x4(const Pack<float>& v) {
  uint2 u;
  u.x = pack16x2(to16<kF16>(v.v[0]), to16<kF16>(v.v[1]));
  u.y = pack16x2(to16<kF16>(v.v[2]), to16<kF16>(v.v[3]));
  return u;
}
/// load_tiles' unrolled form: kBatch packs of each tile loaded, then converted and stored.
template <int HS, bool kF16, int NT, int kBatch>
__device__ __forceinline__ void load_tiles_batched(uint16_t* const (&tile)[NT],
                                                   const float* const (&src)[NT], int r0, int T,
                                                   const int64_t (&stride)[NT]) {
  constexpr int S = HS + 8, Q = HS / 4, kPer = R * Q / kThreads;  // packs per thread and tile
  static_assert(R * Q % kThreads == 0 && kPer % kBatch == 0, "tile and batch sizes");
  GT_UNROLL
  for (int j0 = 0; j0 < kPer; j0 += kBatch) {
    Pack<float> v[NT][kBatch];
    GT_UNROLL
    for (int n = 0; n < NT; ++n) GT_UNROLL
    for (int j = 0; j < kBatch; ++j) {
      const int i = int(threadIdx.x) + (j0 + j) * kThreads, r = i / Q, c = (i % Q) * 4;
      if (r0 + r < T)
        v[n][j] = load_pack(src[n] + int64_t(r0 + r) * stride[n] + c);
      else
        v[n][j] = Pack<float>{};
    }
    GT_UNROLL
    for (int n = 0; n < NT; ++n) GT_UNROLL
    for (int j = 0; j < kBatch; ++j) {
      const int i = int(threadIdx.x) + (j0 + j) * kThreads, r = i / Q, c = (i % Q) * 4;
      *reinterpret_cast<uint2*>(tile[n] + r * S + c) = to16x4<kF16>(v[n][j]);
    }
  }
}
/// NT tiles of up to R rows of HS values each, from src[i] (rows of stride[i] floats, row r0
/// first) into shared memory tile[i] as 16-bit values (rows >= T are zero); all threads of the
/// block (kThreads). The loads are issued kBatch packs per tile at a time before any is
/// converted and stored, so their latencies overlap: a loop that stores each pack before it
/// loads the next waits out one global-memory latency per pack (measured on an H200: the
/// forward at 47 TFLOP/s with such a loop, GPT-2 124M shapes).
template <int HS, bool kF16, int NT, int kBatch>
__device__ __forceinline__ void load_tiles(uint16_t* const (&tile)[NT],
                                           const float* const (&src)[NT], int r0, int T,
                                           const int64_t (&stride)[NT]) {
  constexpr int S = HS + 8, Q = HS / 4;
  if constexpr (kBatch == 0) {  // a pack of each tile at a time, in a loop that is not unrolled
    for (int i = threadIdx.x; i < R * Q; i += kThreads) {
      const int r = i / Q, c = (i % Q) * 4;
      Pack<float> v[NT];
      for (int n = 0; n < NT; ++n)
        v[n] = r0 + r < T ? load_pack(src[n] + int64_t(r0 + r) * stride[n] + c) : Pack<float>{};
      for (int n = 0; n < NT; ++n)
        *reinterpret_cast<uint2*>(tile[n] + r * S + c) = to16x4<kF16>(v[n]);
    }
  } else {
    load_tiles_batched<HS, kF16, NT, kBatch>(tile, src, r0, T, stride);
  }
}
/// One tile (load_tiles with NT = 1), all its packs loaded at once.
template <int HS, bool kF16>
__device__ __forceinline__ void load_tile(uint16_t* tile, const float* a, int r0, int T,
                                          int64_t stride) {
  uint16_t* const t[1] = {tile};
  const float* const src[1] = {a};
  const int64_t st[1] = {stride};
  load_tiles<HS, kF16, 1, R*(HS / 4) / kThreads>(t, src, r0, T, st);
}
/// Two tiles with their loads interleaved, kBatch packs of each at a time.
template <int HS, bool kF16, int kBatch>
__device__ __forceinline__ void load_tile_pair(uint16_t* t0, const float* a0, int64_t stride0,
                                               uint16_t* t1, const float* a1, int64_t stride1,
                                               int r0, int T) {
  uint16_t* const t[2] = {t0, t1};
  const float* const src[2] = {a0, a1};
  const int64_t st[2] = {stride0, stride1};
  load_tiles<HS, kF16, 2, kBatch>(t, src, r0, T, st);
}
/// 16 bytes at p (16-byte aligned; checked on the SIMT runtime), as one int4: not as a Pack of
/// 8 uint16_t, whose bytes read back as an int4 ptxas kept in local memory (a 16-byte stack
/// frame in the flash kernels on sm_90).
__device__ __forceinline__ int4 load16(const uint16_t* p) {
  check_aligned16(p);
  return *reinterpret_cast<const int4*>(p);
}
__device__ __forceinline__ void store16(uint16_t* p, int4 v) {
  check_aligned16(p);
  *reinterpret_cast<int4*>(p) = v;
}
/// One tile from a 16-bit source (the bf16 qkv): up to R rows of HS values of a (rows of stride
/// values, row r0 first) copied into shared memory as they are (rows >= T zero), 16 bytes at a
/// time, one piece after another (all of a thread's loads issued first, as load_tiles does,
/// made ptxas spill the forward kernels on sm_90: 12-16 bytes at head sizes 32 and 64).
template <int HS, bool kF16>
__device__ __forceinline__ void load_tile(uint16_t* tile, const uint16_t* a, int r0, int T,
                                          int64_t stride) {
  constexpr int S = HS + 8, Q = HS / 8;  // 16-byte pieces per row
  for (int i = threadIdx.x; i < R * Q; i += kThreads) {
    const int r = i / Q, c = (i % Q) * 8;
    store16(tile + r * S + c,
            r0 + r < T ? load16(a + int64_t(r0 + r) * stride + c) : make_int4(0, 0, 0, 0));
  }
}
/// One tile of a pair whose other tile has another source type: a 16-bit source as above, an
/// f32 one kBatch packs at a time (load_tiles), as the pair would have loaded it.
template <int HS, bool kF16, int kBatch>
__device__ __forceinline__ void load_one(uint16_t* t, const uint16_t* a, int r0, int T,
                                         int64_t stride) {
  load_tile<HS, kF16>(t, a, r0, T, stride);
}
template <int HS, bool kF16, int kBatch>
__device__ __forceinline__ void load_one(uint16_t* t, const float* a, int r0, int T,
                                         int64_t stride) {
  uint16_t* const tt[1] = {t};
  const float* const src[1] = {a};
  const int64_t st[1] = {stride};
  load_tiles<HS, kF16, 1, kBatch>(tt, src, r0, T, st);
}
/// 4 values of a row at a + off (zeros when !in) as 16-bit values: 8 bytes of a 16-bit source
/// as they are, 16 bytes of an f32 one rounded (to16x4).
template <bool kF16>
__device__ __forceinline__ uint2 piece4(const uint16_t* a, bool in, int64_t off) {
  uint2 z = {0u, 0u};
  return in ? *reinterpret_cast<const uint2*>(a + off) : z;
}
template <bool kF16>
__device__ __forceinline__ uint2 piece4(const float* a, bool in, int64_t off) {
  return to16x4<kF16>(in ? load_pack(a + off) : Pack<float>{});
}
/// Two tiles of which at least one has a 16-bit source: with kBatch = 0 (head size 128, its
/// kernels' registers at ptxas's limit) 4 values of each at a time in one loop, as
/// load_tiles' kBatch = 0 form (each tile loaded on its own spilled the dK-dV kernel); else
/// each loaded on its own.
template <int HS, bool kF16, int kBatch, typename T0, typename T1>
__device__ __forceinline__ void load_tile_pair(uint16_t* t0, const T0* a0, int64_t stride0,
                                               uint16_t* t1, const T1* a1, int64_t stride1, int r0,
                                               int T) {
  if constexpr (kBatch == 0) {
    constexpr int S = HS + 8, Q = HS / 4;
    for (int i = threadIdx.x; i < R * Q; i += kThreads) {
      const int r = i / Q, c = (i % Q) * 4;
      const bool in = r0 + r < T;
      const uint2 u0 = piece4<kF16>(a0, in, int64_t(r0 + r) * stride0 + c);
      const uint2 u1 = piece4<kF16>(a1, in, int64_t(r0 + r) * stride1 + c);
      *reinterpret_cast<uint2*>(t0 + r * S + c) = u0;
      *reinterpret_cast<uint2*>(t1 + r * S + c) = u1;
    }
  } else {
    load_one<HS, kF16, kBatch>(t0, a0, r0, T, stride0);
    load_one<HS, kF16, kBatch>(t1, a1, r0, T, stride1);
  }
}
/// Packs per thread and tile: the batch of load_tile_pair that loads a whole pair at once
/// (HS = 64: a half; HS = 128: 0, a pack of each at a time as before, since the registers
/// of its kernels are at ptxas's limit).
template <int HS>
constexpr int kPairBatch = HS == 128  ? 0
                           : HS == 64 ? R*(HS / 4) / kThreads / 2
                                      : R*(HS / 4) / kThreads;

}  // namespace gt::cuda_kernels::flash_tiles
