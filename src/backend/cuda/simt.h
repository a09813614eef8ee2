// backend/cuda/simt.h: the one header through which the CUDA backend's kernels reach CUDA.
// Under nvcc it is CUDA itself (<<<>>> launches, intrinsics, __shared__); with the host
// compiler it maps the same names onto the SIMT runtime (backend/simt/simt_host.h), so the
// same kernel source (kernels.cu) runs thread by thread on the CPU in CI.
//
// Kernel source written against it uses:
//   - launch(stream, LaunchConfig{grid, block, smem}, "name", kernel, args...): the only way
//     to launch (no <<<>>> in kernel files); errors name the kernel; GT_CUDA_SYNC_CHECK=1
//     synchronizes after every launch;
//   - GT_SHARED(T, name, n), GT_SHARED_2D(T, name, rows, cols), GT_DYNAMIC_SHARED(T, name):
//     shared memory (not `__shared__`, which the host compiler cannot give per block);
//   - GT_UNROLL before a loop: `#pragma unroll` (GCC's own pragma on the host);
//   - threadIdx, blockIdx, blockDim, gridDim, __syncthreads, __syncwarp, __shfl_sync,
//     __shfl_xor_sync, __shfl_up_sync, __shfl_down_sync, __ballot_sync, __any_sync,
//     __all_sync, atomicAdd/Max/Min/CAS/Exch, float2/float4/uint2/uint4/int4 (make_*), __ldg, and
//     the math functions of <cmath>, as CUDA defines them;
//   - bf16_rn(x) / bf16_float(h) / f16_rn(x): bfloat16 and IEEE half conversions (round to
//     nearest even) on raw uint16_t bits, the hardware's on the GPU and cuda_math's
//     (bit-identical) on the host.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>

#include "backend/cuda/kernel_math.h"
#include "backend/simt/launch_config.h"

#if defined(__CUDACC__)
// ============================== CUDA ================================================
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define GT_UNROLL _Pragma("unroll")
#define GT_SHARED(T, name, n) __shared__ T name[n]
#define GT_SHARED_2D(T, name, rows, cols) __shared__ T name[rows][cols]
#define GT_DYNAMIC_SHARED(T, name)                                  \
  extern __shared__ __align__(16) unsigned char gt_dynamic_smem_[]; \
  T* name = reinterpret_cast<T*>(gt_dynamic_smem_)

namespace gt::simt {
/// The stream a launch goes on: CUDA's.
using StreamHandle = cudaStream_t;

/// Throws gt::Error naming the kernel when its launch failed (and, with GT_CUDA_SYNC_CHECK=1,
/// when it failed while running). Defined in kernels_launch.cu.
void after_launch(cudaStream_t s, const char* kernel);
/// Raises a kernel's dynamic shared-memory limit to `bytes` (above 48 KiB needs this).
void allow_dynamic_smem(const void* kernel, size_t bytes);

template <typename... P, typename... A>
void launch(cudaStream_t s, const LaunchConfig& c, const char* name, void (*kernel)(P...),
            A... args) {
  static_assert(sizeof...(P) == sizeof...(A), "a kernel's arguments, one for each parameter");
  if (c.smem > 48 * 1024) allow_dynamic_smem(reinterpret_cast<const void*>(kernel), c.smem);
  kernel<<<dim3(c.grid.x, c.grid.y, c.grid.z), dim3(c.block.x, c.block.y, c.block.z), c.smem, s>>>(
      static_cast<P>(args)...);
  after_launch(s, name);
}
}  // namespace gt::simt

__device__ __forceinline__ uint16_t bf16_rn(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}
__device__ __forceinline__ float bf16_float(uint16_t h) {
  return __uint_as_float(uint32_t(h) << 16);
}
__device__ __forceinline__ uint16_t f16_rn(float x) { return __half_as_ushort(__float2half_rn(x)); }

#else
// ============================== the SIMT runtime on the host ===========================
#include <algorithm>
#include <atomic>
#include <bit>
#include <vector>

#include "backend/simt/simt_host.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) alignas(n)
#define threadIdx (::gt::simt::this_thread().threadIdx)
#define blockIdx (::gt::simt::this_thread().blockIdx)
#define blockDim (::gt::simt::this_thread().blockDim)
#define gridDim (::gt::simt::this_thread().gridDim)
#define warpSize 32

#define GT_UNROLL _Pragma("GCC unroll 16")
#define GT_SHARED(T, name, n) \
  T* name = static_cast<T*>(::gt::simt::shared_static(sizeof(T) * (n), alignof(T), #name))
#define GT_SHARED_2D(T, name, rows, cols) \
  T(*name)                                \
  [cols] = reinterpret_cast<T(*)[cols]>(  \
      ::gt::simt::shared_static(sizeof(T) * (rows) * (cols), alignof(T), #name))
#define GT_DYNAMIC_SHARED(T, name) \
  size_t gt_dynamic_smem_bytes_;   \
  T* name = static_cast<T*>(::gt::simt::shared_dynamic(&gt_dynamic_smem_bytes_))

struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }

namespace gt::simt {
/// The stream a launch goes on: the runtime's.
using StreamHandle = Stream*;

template <typename T>
void add_pointer(std::vector<const void*>& v, const T& a) {
  if constexpr (std::is_pointer_v<T>) v.push_back(static_cast<const void*>(a));
}

/// The launch: the kernel's parameters converted as CUDA converts them, each pointer checked
/// to be device memory, the kernel run once per thread by the runtime.
template <typename... P, typename... A>
void launch(StreamHandle s, const LaunchConfig& c, const char* name, void (*kernel)(P...),
            A... args) {
  static_assert(sizeof...(P) == sizeof...(A), "a kernel's arguments, one for each parameter");
  std::tuple<std::decay_t<P>...> params(static_cast<std::decay_t<P>>(args)...);
  std::vector<const void*> pointers;
  std::apply([&](const auto&... p) { (add_pointer(pointers, p), ...); }, params);
  ::gt::simt::launch(
      s, LaunchSpec{name, c.grid, c.block, c.smem},
      [kernel, params] { std::apply(kernel, params); }, pointers);
}

namespace lanes {
/// Per-lane inputs of the shuffles.
template <typename T>
struct Shfl {
  T v;
  int arg, width;
};
template <typename T>
T poison() {
  T t;
  std::memset(&t, 0xFF, sizeof t);
  return t;
}
/// mode 0: index (__shfl_sync), 1: xor, 2: up, 3: down.
template <typename T, int kMode>
void shfl(const void* const* in, void* const* out, unsigned mask) {
  for (unsigned l = 0; l < 32; ++l) {
    if (!(mask >> l & 1u)) continue;
    const auto& me = *static_cast<const Shfl<T>*>(in[l]);
    const int w = me.width, base = int(l) & ~(w - 1);
    int src;
    switch (kMode) {
      case 0:
        src = base | (me.arg & (w - 1));
        break;
      case 1:
        src = int(l) ^ me.arg;
        if ((src & ~(w - 1)) > base) src = int(l);  // a later group: its own value
        break;
      case 2:
        src = int(l) - me.arg;
        if (src < base) src = int(l);
        break;
      default:
        src = int(l) + me.arg;
        if (src >= base + w) src = int(l);
        break;
    }
    *static_cast<T*>(out[l]) =
        (mask >> src & 1u) ? static_cast<const Shfl<T>*>(in[src])->v : poison<T>();
  }
}
/// mode 0: ballot, 1: any, 2: all.
template <int kMode>
void vote(const void* const* in, void* const* out, unsigned mask) {
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l)
    if ((mask >> l & 1u) && *static_cast<const int*>(in[l])) bits |= 1u << l;
  const unsigned r = kMode == 0 ? bits : kMode == 1 ? unsigned(bits != 0) : unsigned(bits == mask);
  for (unsigned l = 0; l < 32; ++l)
    if (mask >> l & 1u) *static_cast<unsigned*>(out[l]) = r;
}
inline void nothing(const void* const*, void* const*, unsigned) {}
template <typename T>
T shuffle(unsigned mask, T v, int arg, int width, gt::simt::CollectiveFn fn, const char* what) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "shuffles move 32- or 64-bit values");
  const Shfl<T> in{v, arg, width};
  T out;
  gt::simt::warp_collective(mask, fn, &in, &out, what);
  return out;
}
}  // namespace lanes
}  // namespace gt::simt

inline void __syncthreads() { ::gt::simt::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xFFFFFFFFu) {
  ::gt::simt::warp_collective(mask, &::gt::simt::lanes::nothing, nullptr, nullptr, "__syncwarp");
}
template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::gt::simt::lanes::shuffle(mask, v, src, width, &::gt::simt::lanes::shfl<T, 0>,
                                    "__shfl_sync");
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::gt::simt::lanes::shuffle(mask, v, lane_mask, width, &::gt::simt::lanes::shfl<T, 1>,
                                    "__shfl_xor_sync");
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::gt::simt::lanes::shuffle(mask, v, int(delta), width, &::gt::simt::lanes::shfl<T, 2>,
                                    "__shfl_up_sync");
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::gt::simt::lanes::shuffle(mask, v, int(delta), width, &::gt::simt::lanes::shfl<T, 3>,
                                    "__shfl_down_sync");
}
inline unsigned gt_simt_vote(unsigned mask, int pred, gt::simt::CollectiveFn fn, const char* w) {
  const int in = pred != 0;
  unsigned out;
  ::gt::simt::warp_collective(mask, fn, &in, &out, w);
  return out;
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return gt_simt_vote(mask, pred, &::gt::simt::lanes::vote<0>, "__ballot_sync");
}
inline int __any_sync(unsigned mask, int pred) {
  return int(gt_simt_vote(mask, pred, &::gt::simt::lanes::vote<1>, "__any_sync"));
}
inline int __all_sync(unsigned mask, int pred) {
  return int(gt_simt_vote(mask, pred, &::gt::simt::lanes::vote<2>, "__all_sync"));
}

template <typename T>
T atomicAdd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v);
}
template <typename T>
T atomicExch(T* p, T v) {
  return std::atomic_ref<T>(*p).exchange(v);
}
template <typename T>
T atomicCAS(T* p, T expected, T desired) {
  std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
  return expected;
}
template <typename T>
T atomicMax(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
template <typename T>
T atomicMin(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
template <typename T>
T __ldg(const T* p) {
  return *p;
}
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __saturatef(float x) { return std::fmin(std::fmax(x, 0.0f), 1.0f); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __clz(unsigned x) { return std::countl_zero(x); }
inline int __ffs(unsigned x) { return x ? std::countr_zero(x) + 1 : 0; }
using std::max;
using std::min;

inline uint16_t bf16_rn(float x) { return ::gt::cuda_math::to_bf16(x); }
inline float bf16_float(uint16_t h) { return ::gt::cuda_math::bf16_to_float(h); }
inline uint16_t f16_rn(float x) { return ::gt::cuda_math::to_f16(x); }
#endif
