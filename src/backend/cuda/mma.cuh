// backend/cuda/mma.cuh: the tensor-core product of the CUDA backend's kernels: one warp's
// D += A B for a 16 x 8 x 16 tile in bf16 or fp16 with f32 accumulation, PTX's
// `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32` (sm_80 and later; PTX ISA,
// "Matrix Fragments for mma.m16n8k16 with floating point type"). Each lane holds its part of
// the tile in registers: with g = lane / 4 and t = lane % 4,
//   A (16 x 16, row-major): a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..2t+1],
//                           a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9];
//   B (16 x 8, k x n):      b[0] = B[2t..2t+1][g],  b[1] = B[2t+8..2t+9][g];
//   C, D (16 x 8, f32):     d[0] = D[g][2t], d[1] = D[g][2t+1], d[2] = D[g+8][2t], d[3] =
//   D[g+8][2t+1];
// each 32-bit register two 16-bit values, the lower index in the low half. On the GPU it is
// the instruction; on the SIMT runtime a warp collective that gathers the 32 lanes'
// fragments, forms A, B and C, multiplies in f32 and hands each lane its part of D, so a
// kernel's fragment indexing runs, and is checked, on the CPU.
// The fragments come from shared memory by `ldmatrix.sync.aligned.m8n8.x4{,.trans}.shared.b16`
// (sm_75 and later; PTX ISA, "Warp-level matrix load instruction: ldmatrix"): four 8 x 8
// matrices of 16-bit values, lane l giving the address of one 16-byte row (lanes 8i .. 8i+7:
// rows 0-7 of matrix i); lane l's register i holds matrix i's row l / 4, columns 2(l % 4) and
// 2(l % 4) + 1 (with .trans: column l / 4, rows 2(l % 4) and 2(l % 4) + 1), the lower index
// in the low half: an A fragment is one x4 (matrices at rows +0, +8 and columns +0, +8), as
// are the B fragments of two adjacent n-tiles.
#pragma once
#include <cstdint>
#include <string>

#include "backend/cuda/kernel_math.h"
#include "backend/cuda/simt.h"

namespace gt::cuda_kernels {

/// Two 16-bit values in one register, lo in the low half.
__device__ __forceinline__ uint32_t pack16x2(uint16_t lo, uint16_t hi) {
  return uint32_t(lo) | (uint32_t(hi) << 16);
}

#if !defined(__CUDACC__)
namespace mma_host {
struct Lane {
  uint32_t a[4], b[2];
  float c[4];
  bool f16;
};
inline float half_value(uint32_t r, int hi, bool f16) {
  const uint16_t h = uint16_t(hi ? r >> 16 : r & 0xFFFFu);
  return f16 ? cuda_math::f16_to_float(h) : cuda_math::bf16_to_float(h);
}
/// The collective: A, B, C from the lanes' fragments; D = A B + C (f32 sums in k order).
inline void mma_16816(const void* const* in, void* const* out, unsigned mask) {
  if (mask != 0xFFFFFFFFu) throw Error("mma.sync m16n8k16 needs the whole warp (mask 0xffffffff)");
  float A[16][16], B[16][8], C[16][8];
  const bool f16 = static_cast<const Lane*>(in[0])->f16;
  for (int lane = 0; lane < 32; ++lane) {
    const Lane& l = *static_cast<const Lane*>(in[lane]);
    const int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = half_value(l.a[0], h, f16);
      A[g + 8][2 * t + h] = half_value(l.a[1], h, f16);
      A[g][2 * t + 8 + h] = half_value(l.a[2], h, f16);
      A[g + 8][2 * t + 8 + h] = half_value(l.a[3], h, f16);
      B[2 * t + h][g] = half_value(l.b[0], h, f16);
      B[2 * t + 8 + h][g] = half_value(l.b[1], h, f16);
    }
    C[g][2 * t] = l.c[0];
    C[g][2 * t + 1] = l.c[1];
    C[g + 8][2 * t] = l.c[2];
    C[g + 8][2 * t + 1] = l.c[3];
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    float* d = static_cast<float*>(out[lane]);
    const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    for (int i = 0; i < 4; ++i) {
      float s = C[rows[i]][cols[i]];
      for (int k = 0; k < 16; ++k) s += A[rows[i]][k] * B[k][cols[i]];
      d[i] = s;
    }
  }
}
/// ldmatrix's collective (kTrans: .trans): in[l] holds lane l's row address, out[l] gets its 4
/// registers. Rows must be 16-byte aligned (PTX: else the behaviour is undefined).
template <bool kTrans>
inline void ldmatrix_x4(const void* const* in, void* const* out, unsigned mask) {
  if (mask != 0xFFFFFFFFu) throw Error("ldmatrix.sync needs the whole warp (mask 0xffffffff)");
  const uint16_t* row[32];
  for (int lane = 0; lane < 32; ++lane) {
    row[lane] = *static_cast<const uint16_t* const*>(in[lane]);
    if (reinterpret_cast<uintptr_t>(row[lane]) % 16 != 0)
      throw Error("ldmatrix: lane " + std::to_string(lane) +
                  "'s row address is not 16-byte aligned");
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    uint32_t* r = static_cast<uint32_t*>(out[lane]);
    for (int i = 0; i < 4; ++i)
      r[i] = kTrans ? pack16x2(row[8 * i + 2 * t][g], row[8 * i + 2 * t + 1][g])
                    : pack16x2(row[8 * i + g][2 * t], row[8 * i + g][2 * t + 1]);
  }
}
}  // namespace mma_host
#endif

/// r[0..3] = the four 8 x 8 matrices whose rows the lanes address (p: this lane's row, 8
/// 16-bit values at a 16-byte aligned shared-memory address), lane l getting row l / 4,
/// columns 2(l % 4) .. 2(l % 4) + 1 of each; kTrans: their transposes (column l / 4, rows
/// 2(l % 4) .. 2(l % 4) + 1). PTX ISA, "Warp-level matrix load instruction: ldmatrix". Every
/// lane of the warp must call it together.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4_impl(uint32_t* r, const uint16_t* p) {
#if defined(__CUDA_ARCH__)
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#elif !defined(__CUDACC__)
  ::gt::simt::warp_collective(0xFFFFFFFFu, &mma_host::ldmatrix_x4<kTrans>, &p, r,
                              kTrans ? "ldmatrix.sync.x4.trans" : "ldmatrix.sync.x4");
#endif
}
/// ldmatrix.x4: the 4 matrices as they are (A fragments, B fragments from B's columns).
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const uint16_t* p) {
  ldmatrix_x4_impl<false>(r, p);
}
/// ldmatrix.x4.trans: the 4 matrices transposed (B fragments from B's rows).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const uint16_t* p) {
  ldmatrix_x4_impl<true>(r, p);
}

/// d += A b for this warp's 16 x 8 x 16 tile (fragments as above); kF16: fp16 operands, else
/// bf16. Every lane of the warp must call it together.
template <bool kF16>
__device__ __forceinline__ void mma_16816(float* d, const uint32_t* a, const uint32_t* b) {
#if defined(__CUDA_ARCH__)
  if constexpr (kF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif !defined(__CUDACC__)
  mma_host::Lane in;
  for (int i = 0; i < 4; ++i) in.a[i] = a[i], in.c[i] = d[i];
  in.b[0] = b[0];
  in.b[1] = b[1];
  in.f16 = kF16;
  ::gt::simt::warp_collective(0xFFFFFFFFu, &mma_host::mma_16816, &in, d, "mma.sync.m16n8k16");
#endif
}

}  // namespace gt::cuda_kernels
