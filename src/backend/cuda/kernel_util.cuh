// backend/cuda/kernel_util.cuh: what the CUDA backend's kernel files share: warp and block
// reductions by shuffles, 16-byte packs of f32 or bf16 elements (llm.c's Packed128), and the
// element conversions. Device code under nvcc, the same code on the SIMT runtime elsewhere
// (backend/cuda/simt.h). On the SIMT runtime a 16-byte access checks its alignment (a GPU
// faults on a misaligned one).
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#include "backend/cuda/kernel_math.h"
#include "backend/cuda/simt.h"
#include "core/error.h"
#if defined(__CUDACC__)
#include <cuda_fp8.h>
#endif

namespace gt::cuda_kernels {

constexpr unsigned kFullMask = 0xFFFFFFFFu;

/// float -> fp8 (e4m3, or e5m2), round to nearest even, saturating to the largest finite
/// value: on Ada and Hopper (sm_89+) the hardware conversion (PTX cvt.rn.satfinite.e4m3x2.f32,
/// through cuda_fp8.h's __nv_cvt_float_to_fp8), elsewhere cuda_math::to_fp8, the same function
/// in software (bit for bit, but for NaN's sign bit: the hardware's NaN is 0x7F).
__device__ __forceinline__ uint8_t fp8_rn(float x, bool e5m2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
#else
  return cuda_math::to_fp8(x, e5m2);
#endif
}

/// Sum over the 32 lanes of a warp (butterfly: every lane gets it, in the same order).
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  GT_UNROLL
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
/// Maximum over the 32 lanes of a warp.
__device__ __forceinline__ float warp_max(float v) {
  GT_UNROLL
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
/// Sum over the block (blockDim.x a multiple of 32, at most 1024), in every thread; scratch:
/// 32 values of shared memory, free again when this returns (a barrier guards its reuse).
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : T(0);
  return warp_sum(v);
}
/// Maximum over the block, in every thread (as block_sum).
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

// ---- elements: f32, or bf16 as its raw 16 bits --------------------------------------------
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(uint16_t x) { return bf16_float(x); }
template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ uint16_t from_f<uint16_t>(float x) {
  return bf16_rn(x);
}

/// 16 bytes of elements of type T (4 floats or 8 bf16), loaded and stored as one access.
template <typename T>
struct alignas(16) Pack {
  static constexpr int N = 16 / int(sizeof(T));
  T v[N];
  __device__ __forceinline__ float get(int i) const { return to_f(v[i]); }
  __device__ __forceinline__ void set(int i, float x) { v[i] = from_f<T>(x); }
};

__device__ __forceinline__ void check_aligned16(const void* p) {
#if !defined(__CUDACC__)
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
    throw Error(fmt::format("a 16-byte access at {} is not 16-byte aligned (a GPU faults)", p));
#else
  (void)p;
#endif
}
/// The pack at p (16-byte aligned).
template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  check_aligned16(p);
  Pack<T> r;
#if defined(__CUDACC__)
  *reinterpret_cast<int4*>(&r) = *reinterpret_cast<const int4*>(p);
#else
  std::memcpy(&r, p, 16);
#endif
  return r;
}
template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& x) {
  check_aligned16(p);
#if defined(__CUDACC__)
  *reinterpret_cast<int4*>(p) = *reinterpret_cast<const int4*>(&x);
#else
  std::memcpy(p, &x, 16);
#endif
}

/// Whether p is 16-byte aligned and n elements of T fill whole packs: the vector path.
template <typename T>
inline bool packs_fit(const void* p, int64_t n) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && n % Pack<T>::N == 0;
}

/// Blocks of `threads` for n independent items, and at most `max_blocks` (a grid-stride loop
/// covers the rest): the launch of the element-wise kernels.
inline simt::LaunchConfig grid_for(int64_t n, unsigned threads, int64_t max_blocks = 1 << 20) {
  int64_t blocks = (n + threads - 1) / threads;
  blocks = blocks < 1 ? 1 : blocks > max_blocks ? max_blocks : blocks;
  return simt::LaunchConfig{simt::Dim3(unsigned(blocks)), simt::Dim3(threads), 0};
}

}  // namespace gt::cuda_kernels
