// backend/cuda/kernels_elementwise.cu: the element-wise kernels of the CUDA backend (16-bit
// copies, embedding, GELU and its fused forms, residual, scale, bias), the multi-tensor AdamW,
// the gradient norm (a fixed grid: the same sum on every GPU) and the fp8 cast with its amax.
// Grid-stride loops over 16-byte packs where the pointers allow, single elements otherwise.
// Launch shapes: kernel_configs.h. Compiled by nvcc and, on the SIMT runtime, by the host
// compiler (kernels_elementwise_emu.cpp).
#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "backend/cuda/kernel_configs.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/kernels.h"
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

#define GT_GRID_STRIDE(i, n)                                                \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

/// Whether every non-null pointer is 16-byte aligned and n is a multiple of 4: the float4 path.
inline bool vec4(int64_t n, std::initializer_list<const void*> ps) {
  if (n % 4 != 0) return false;
  for (const void* p : ps)
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

/// The element-wise kernel: f(i) for every i < n (kVec: f4(j) for every pack j < n/4).
template <typename F>
__global__ void elementwise_kernel(int64_t n, F f) {
  GT_GRID_STRIDE(i, n) f(i);
}
template <typename F>
void launch_n(Kernels::Stream s, const char* name, int64_t n, F f) {
  if (n <= 0) return;
  simt::launch(s, cfg::elementwise(n), name, &elementwise_kernel<F>, n, f);
}

// ---- 16-bit copies ---------------------------------------------------------------------------
namespace hot {
__global__ void round16_kernel(uint16_t* __restrict__ out, const float* __restrict__ x, int64_t n,
                               int bf16, int vec) {
  if (vec) {
    GT_GRID_STRIDE(j, n / 4) {
      const Pack<float> v = load_pack(x + 4 * j);
      uint2 u;
      if (bf16) {
        u.x = uint32_t(bf16_rn(v.v[0])) | uint32_t(bf16_rn(v.v[1])) << 16;
        u.y = uint32_t(bf16_rn(v.v[2])) | uint32_t(bf16_rn(v.v[3])) << 16;
      } else {
        u.x = uint32_t(m::to_f16(v.v[0])) | uint32_t(m::to_f16(v.v[1])) << 16;
        u.y = uint32_t(m::to_f16(v.v[2])) | uint32_t(m::to_f16(v.v[3])) << 16;
      }
      *reinterpret_cast<uint2*>(out + 4 * j) = u;
    }
  } else {
    GT_GRID_STRIDE(i, n) out[i] = bf16 ? bf16_rn(x[i]) : m::to_f16(x[i]);
  }
}
}  // namespace hot

// ---- embedding -----------------------------------------------------------------------------
/// out(B,T,C) = wte[inp] + wpe[t]: a thread per pack of 4 channels (C a multiple of 4) or per
/// element.
namespace hot {
__global__ void embedding_forward_kernel(float* __restrict__ out, const int32_t* __restrict__ inp,
                                         const float* __restrict__ wte,
                                         const float* __restrict__ wpe, int64_t BT, int T, int C,
                                         int vec) {
  if (vec) {
    const int64_t packs = BT * (C / 4);
    GT_GRID_STRIDE(j, packs) {
      const int64_t bt = j / (C / 4), c = (j % (C / 4)) * 4, t = bt % T;
      const Pack<float> a = load_pack(wte + int64_t(inp[bt]) * C + c),
                        b = load_pack(wpe + t * C + c);
      Pack<float> o;
      GT_UNROLL
      for (int i = 0; i < 4; ++i) o.v[i] = a.v[i] + b.v[i];
      store_pack(out + bt * C + c, o);
    }
  } else {
    GT_GRID_STRIDE(i, BT * C) m::embedding_forward_elem(i, out, inp, wte, wpe, T, C);
  }
}
}  // namespace hot
__global__ void embedding_wte_kernel(float* __restrict__ dwte, const float* __restrict__ dout,
                                     const int32_t* __restrict__ tokens,
                                     const int32_t* __restrict__ off,
                                     const int32_t* __restrict__ pos, int64_t n, int C) {
  GT_GRID_STRIDE(i, n) m::embedding_backward_wte_elem(i, dwte, dout, tokens, off, pos, C);
}
__global__ void embedding_wpe_kernel(float* __restrict__ dwpe, const float* __restrict__ dout,
                                     int B, int T, int C) {
  GT_GRID_STRIDE(i, int64_t(T) * C) m::embedding_backward_wpe_elem(i, dwpe, dout, B, T, C);
}

// ---- GELU and friends --------------------------------------------------------------------
/// The GELU family, one kernel: mode 0 forward (out = gelu(x)); 1 fused (out and dgelu =
/// gelu'(x)); 2 backward (d = gelu'(x) * dout); 3 bias + GELU of a product (out = gelu(prod +
/// bias[i % OC]), and (g32, g16) = prod + bias when not null); 4 the GELU backward applied to a
/// product (out = prod * dgelu); 5 the same from the saved input (out = prod * gelu'(pre)).
/// Outputs f32 or bf16 (the (p32, p16) pairs of kernels.h).
struct GeluArgs {
  float *o32, *g32;
  uint16_t *o16, *g16;
  const float *x, *dout, *bias;
  const uint16_t* x16;  // modes 4 and 5: dgelu or pre as bf16
  int OC;
};
__device__ __forceinline__ void gelu_elem(int mode, const GeluArgs& a, int64_t i) {
  switch (mode) {
    case 0:
      m::store(a.o32, a.o16, i, m::gelu(a.x[i]));
      break;
    case 1:
      m::gelu_forward_fused_elem(i, a.o32, a.o16, a.g32, a.g16, a.x);
      break;
    case 2:
      m::store(a.o32, a.o16, i, m::gelu_grad(a.x[i]) * a.dout[i]);
      break;
    case 3:
      m::bias_gelu_elem(i, a.o32, a.o16, a.g32, a.g16, a.x, a.bias, a.OC);
      break;
    case 4:
      m::mul_elem(i, a.o32, a.o16, a.x, a.dout, a.x16);
      break;
    default:
      m::mul_gelu_grad_elem(i, a.o32, a.o16, a.x, a.dout, a.x16);
  }
}
namespace hot {
__global__ void gelu_kernel(int mode, GeluArgs a, int64_t n) {
  GT_GRID_STRIDE(i, n) gelu_elem(mode, a, i);
}
}  // namespace hot
void launch_gelu(Kernels::Stream s, const char* name, int mode, const GeluArgs& a, int64_t n) {
  if (n <= 0) return;
  simt::launch(s, cfg::elementwise(n), name, &gelu_kernel, mode, a, n);
}

// ---- residual, scale, bias ----------------------------------------------------------------------
namespace hot {
__global__ void residual_kernel(float* __restrict__ out, const float* __restrict__ a,
                                const float* __restrict__ b, int64_t n, int vec) {
  if (vec) {
    GT_GRID_STRIDE(j, n / 4) {
      Pack<float> x = load_pack(a + 4 * j);
      const Pack<float> y = load_pack(b + 4 * j);
      GT_UNROLL
      for (int k = 0; k < 4; ++k) x.v[k] += y.v[k];
      store_pack(out + 4 * j, x);
    }
  } else {
    GT_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
  }
}
}  // namespace hot
/// g *= f (f32, or bf16 rounded to nearest-even again).
template <typename T>
__global__ void scale_kernel(T* __restrict__ g, float f, int64_t n) {
  GT_GRID_STRIDE(i, n) g[i] = from_f<T>(to_f(g[i]) * f);
}
__global__ void bias_add_kernel(float* __restrict__ out, const float* __restrict__ bias, int64_t n,
                                int OC) {
  GT_GRID_STRIDE(i, n) out[i] += bias[i % OC];
}

// ---- AdamW -----------------------------------------------------------------------------------
__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g,
                             float* __restrict__ mm, float* __restrict__ v, int64_t n,
                             float grad_mult, float lr, float beta1, float beta2, float eps,
                             float decay, float bc1, float bc2_sqrt) {
  GT_GRID_STRIDE(j, n)
  m::adamw_elem(j, p, g, mm, v, grad_mult, lr, beta1, beta2, eps, decay, bc1, bc2_sqrt);
}
/// One block per chunk of the table; 16-byte packs where the chunk's four tensors allow. The
/// gradient multiplier is grad_mult, or from the norm on the device (norm_sq given: every block
/// computes the same double; a non-finite norm changes nothing); flag gathers inf or NaN in
/// what the update wrote.
namespace hot {
__global__ void adamw_multi_kernel(const AdamChunk* __restrict__ chunks, float grad_mult,
                                   const double* __restrict__ norm_sq, double loss_scale,
                                   double clip, float lr, float beta1, float beta2, float eps,
                                   float bc1, float bc2_sqrt, int* __restrict__ flag) {
  if (norm_sq) {
    const double sq = *norm_sq;
    if (!(sq <= 1.0e308)) return;  // inf or NaN: the step is skipped
    grad_mult = float(adam_grad_mult(sq, loss_scale, clip));
  }
  const AdamChunk c = chunks[blockIdx.x];
  const float decay = 1.0f - lr * c.wd;
  bool bad = false;
  const bool vec = (c.begin % 4 == 0) && (c.end % 4 == 0) &&
                   ((reinterpret_cast<uintptr_t>(c.p) | reinterpret_cast<uintptr_t>(c.g) |
                     reinterpret_cast<uintptr_t>(c.m) | reinterpret_cast<uintptr_t>(c.v)) %
                        16 ==
                    0);
  if (vec) {
    for (int64_t j = c.begin + 4 * int64_t(threadIdx.x); j < c.end; j += 4 * int64_t(blockDim.x)) {
      Pack<float> p = load_pack(c.p + j), mv = load_pack(c.m + j), vv = load_pack(c.v + j);
      const Pack<float> gv = load_pack(c.g + j);
      GT_UNROLL
      for (int k = 0; k < 4; ++k) {
        const float gi = gv.v[k] * grad_mult;
        mv.v[k] = beta1 * mv.v[k] + (1.0f - beta1) * gi;
        vv.v[k] = beta2 * vv.v[k] + (1.0f - beta2) * gi * gi;
        p.v[k] = p.v[k] * decay - (lr / bc1) * mv.v[k] / (sqrtf(vv.v[k]) / bc2_sqrt + eps);
        bad |= !(fabsf(p.v[k]) <= 3.4e38f) || !(fabsf(mv.v[k]) <= 3.4e38f) || !(vv.v[k] <= 3.4e38f);
      }
      store_pack(c.p + j, p);
      store_pack(c.m + j, mv);
      store_pack(c.v + j, vv);
    }
  } else {
    for (int64_t j = c.begin + threadIdx.x; j < c.end; j += blockDim.x) {
      m::adamw_elem(j, c.p, c.g, c.m, c.v, grad_mult, lr, beta1, beta2, eps, decay, bc1, bc2_sqrt);
      bad |= !(fabsf(c.p[j]) <= 3.4e38f) || !(fabsf(c.m[j]) <= 3.4e38f) || !(c.v[j] <= 3.4e38f);
    }
  }
  if (bad && flag) atomicExch(flag, 1);
}
}  // namespace hot

// ---- the gradient norm -----------------------------------------------------------------------
/// partial[block] = sum of squares (double) of the elements block, block + kNormBlocks*256 ...
/// seen by its threads (a fixed grid: the same order on every GPU), block-reduced in order.
namespace hot {
__global__ void sum_squares_kernel(double* __restrict__ partial, const float* __restrict__ g,
                                   int64_t n) {
  GT_SHARED(double, scratch, 32);
  double s = 0.0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    s += double(g[i]) * g[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}
}  // namespace hot
/// out[0] = sum of the `parts` partials (one block of at least `parts` threads).
__global__ void sum_squares_finish_kernel(double* __restrict__ out,
                                          const double* __restrict__ partial, unsigned parts) {
  GT_SHARED(double, scratch, 32);
  const double s = block_sum(threadIdx.x < parts ? partial[threadIdx.x] : 0.0, scratch);
  if (threadIdx.x == 0) out[0] = s;
}

// ---- fp8 ---------------------------------------------------------------------------------------
/// The amax of x (n elements) into the state's current-amax slot (atomicMax on the bits of a
/// non-negative float: order-free, so deterministic); NaN is ignored.
__global__ void fp8_amax_kernel(float* __restrict__ state, const float* __restrict__ x, int64_t n) {
  GT_SHARED(float, scratch, 32);
  float a = 0.f;
  GT_GRID_STRIDE(i, n) a = fmaxf(a, fabsf(x[i]));
  a = block_max(a, scratch);
  if (threadIdx.x == 0)
    atomicMax(reinterpret_cast<unsigned*>(state + m::kFp8AmaxNow), __float_as_uint(a));
}
/// The scale this use takes: the history's (delayed scaling), or on the first use the
/// current amax's.
__device__ __forceinline__ float fp8_scale_now(const float* state, float fmax) {
  if (state[m::kAmaxHistory] == 0.f) {
    const float a = state[m::kFp8AmaxNow];
    return a > 0.f ? fmax / a : 1.0f;
  }
  return state[m::kAmaxHistory + 1];
}
/// q = fp8(x * scale) in x's layout, and x's amax folded into the state (as fp8_amax_kernel).
namespace hot {
__global__ void fp8_cast_kernel(uint8_t* __restrict__ q, float* __restrict__ state,
                                const float* __restrict__ x, int64_t n, int e5m2) {
  GT_SHARED(float, scratch, 32);
  const float scale = fp8_scale_now(state, e5m2 ? m::kE5m2Max : m::kE4m3Max);
  float a = 0.f;
  GT_GRID_STRIDE(i, n) {
    a = fmaxf(a, fabsf(x[i]));
    q[i] = fp8_rn(x[i] * scale, e5m2);
  }
  a = block_max(a, scratch);
  if (threadIdx.x == 0)
    atomicMax(reinterpret_cast<unsigned*>(state + m::kFp8AmaxNow), __float_as_uint(a));
}
}  // namespace hot
/// Four fp8 values (x[j] * scale) at dst, dst + 1, ...: one 32-bit store when `whole` (all
/// four inside the row, dst 4-byte aligned), else a byte each for the first n.
__device__ __forceinline__ void store_fp8x4(uint8_t* dst, const float* x, float scale, int e5m2,
                                            bool whole, int64_t n) {
  uint8_t b[4];
  for (int j = 0; j < 4; ++j) b[j] = fp8_rn(x[j] * scale, e5m2);
  if (whole) {
    *reinterpret_cast<uint32_t*>(dst) =
        uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
  } else {
    for (int j = 0; j < 4 && j < n; ++j) dst[j] = b[j];
  }
}
/// The transposed cast: x (rows, cols) -> q (cols, rows), 64 x 64 tiles through shared memory
/// (configs::fp8_transpose: 256 threads), with the amax; when qp is not null, also the cast in
/// x's own layout into qp (rows, cols), from the same read (Transformer Engine's
/// cast_transpose: the two operands of a gradient's products at one read of it). The reads are
/// 16-byte packs along x's rows, the writes 4 fp8 values (one 32-bit word) along q's rows where
/// rows % 4 == 0; the tile's row stride of 65 floats keeps the column reads at two lanes a bank.
/// (The 32 x 32 form before, one byte a thread and the software conversion, ran at 19 % of the copy
/// bandwidth on an H200.)
namespace hot {
__global__ void fp8_cast_transpose_kernel(uint8_t* __restrict__ q, uint8_t* __restrict__ qp,
                                          float* __restrict__ state, const float* __restrict__ x,
                                          int64_t rows, int64_t cols, int e5m2) {
  constexpr int kT = cfg::kFp8Tile, kQ = kT / 4;  // tile side; packs of 4 per tile row
  GT_SHARED_2D(float, tile, kT, kT + 1);
  GT_SHARED(float, scratch, 32);
  const float scale = fp8_scale_now(state, e5m2 ? m::kE5m2Max : m::kE4m3Max);
  const int64_t c0 = int64_t(blockIdx.x) * kT, r0 = int64_t(blockIdx.y) * kT;
  const bool vec_in = cols % 4 == 0, vec_out = rows % 4 == 0;
  float a = 0.f;
  for (int i = threadIdx.x; i < kT * kQ; i += blockDim.x) {
    const int r = i / kQ, c = (i % kQ) * 4;
    float v[4];
    if (vec_in && r0 + r < rows && c0 + c + 3 < cols) {
      const Pack<float> p = load_pack(x + (r0 + r) * cols + c0 + c);
      for (int j = 0; j < 4; ++j) v[j] = p.v[j];
    } else {
      for (int j = 0; j < 4; ++j)
        v[j] = r0 + r < rows && c0 + c + j < cols ? x[(r0 + r) * cols + c0 + c + j] : 0.f;
    }
    for (int j = 0; j < 4; ++j) {
      tile[r][c + j] = v[j];
      a = fmaxf(a, fabsf(v[j]));
    }
    if (qp && r0 + r < rows)  // the plain layout: 4 values of one row
      store_fp8x4(qp + (r0 + r) * cols + c0 + c, v, scale, e5m2, vec_in && c0 + c + 3 < cols,
                  cols - (c0 + c));
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kT * kQ; i += blockDim.x) {
    const int c = i / kQ, r = (i % kQ) * 4;  // q row c0 + c, columns r0 + r .. + 3
    if (c0 + c >= cols) continue;
    const float col[4] = {tile[r][c], tile[r + 1][c], tile[r + 2][c], tile[r + 3][c]};
    store_fp8x4(q + (c0 + c) * rows + r0 + r, col, scale, e5m2, vec_out && r0 + r + 3 < rows,
                rows - (r0 + r));
  }
  a = block_max(a, scratch);
  if (threadIdx.x == 0)
    atomicMax(reinterpret_cast<unsigned*>(state + m::kFp8AmaxNow), __float_as_uint(a));
}
}  // namespace hot
/// After the cast (one thread): the scale used is recorded, the amax joins the history and
/// the next scale follows from it (m::fp8_scale_step); the current amax slot is cleared.
__global__ void fp8_update_kernel(float* __restrict__ state, int e5m2) {
  const float fmax = e5m2 ? m::kE5m2Max : m::kE4m3Max;
  const float amax = state[m::kFp8AmaxNow];
  m::fp8_scale_step(state, &amax, 1, fmax);
  state[m::kFp8AmaxNow] = 0.f;
}

}  // namespace

// ---- the launchers ----------------------------------------------------------------------------
void Kernels::round16(Stream s, uint16_t* out, const float* x, int64_t n, bool bf16) {
  if (n <= 0) return;
  const bool vec = vec4(n, {out, x});
  simt::launch(s, cfg::elementwise(vec ? n / 4 : n), "round16", &round16_kernel, out, x, n,
               int(bf16), int(vec));
}
void Kernels::widen16(Stream s, float* out, const uint16_t* x, int64_t n, bool bf16) {
  launch_n(s, "widen16", n, [=] __device__(int64_t i) {
    out[i] = bf16 ? m::bf16_to_float(x[i]) : m::f16_to_float(x[i]);
  });
}
void Kernels::round_bf16_stochastic(Stream s, uint16_t* out, const float* x, int64_t n,
                                    uint64_t key) {
  launch_n(s, "round_bf16_stochastic", n,
           [=] __device__(int64_t i) { m::round_bf16_stochastic_elem(i, out, x, key); });
}
void Kernels::embedding_forward(Stream s, float* out, const int32_t* inp, const float* wte,
                                const float* wpe, int B, int T, int C) {
  const int64_t BT = int64_t(B) * T;
  if (BT <= 0) return;
  const bool vec = C % 4 == 0 && vec4(4, {out, wte, wpe});
  simt::launch(s, cfg::elementwise(vec ? BT * (C / 4) : BT * C), "embedding_forward",
               &embedding_forward_kernel, out, inp, wte, wpe, BT, T, C, int(vec));
}
void Kernels::embedding_backward(Stream s, float* dwte, float* dwpe, const float* dout,
                                 const int32_t* tokens, const int32_t* off, const int32_t* pos,
                                 int U, int B, int T, int C) {
  if (U > 0)
    simt::launch(s, cfg::elementwise(int64_t(U) * C), "embedding_backward (wte)",
                 &embedding_wte_kernel, dwte, dout, tokens, off, pos, int64_t(U) * C, C);
  if (T > 0)
    simt::launch(s, cfg::elementwise(int64_t(T) * C), "embedding_backward (wpe)",
                 &embedding_wpe_kernel, dwpe, dout, B, T, C);
}
void Kernels::gelu_forward(Stream s, float* o32, uint16_t* o16, const float* inp, int64_t n) {
  launch_gelu(s, "gelu_forward", 0, {o32, nullptr, o16, nullptr, inp, nullptr, nullptr, nullptr, 0},
              n);
}
void Kernels::gelu_backward(Stream s, float* d32, uint16_t* d16, const float* inp,
                            const float* dout, int64_t n) {
  launch_gelu(s, "gelu_backward", 2, {d32, nullptr, d16, nullptr, inp, dout, nullptr, nullptr, 0},
              n);
}
void Kernels::gelu_forward_fused(Stream s, float* o32, uint16_t* o16, float* g32, uint16_t* g16,
                                 const float* inp, int64_t n) {
  launch_gelu(s, "gelu_forward_fused", 1, {o32, g32, o16, g16, inp, nullptr, nullptr, nullptr, 0},
              n);
}
void Kernels::bias_gelu(Stream s, float* o32, uint16_t* o16, float* p32, uint16_t* p16,
                        const float* prod, const float* bias, int64_t N, int OC) {
  launch_gelu(s, "bias_gelu", 3, {o32, p32, o16, p16, prod, nullptr, bias, nullptr, OC}, N * OC);
}
void Kernels::mul(Stream s, float* o32, uint16_t* o16, const float* prod, const float* g32,
                  const uint16_t* g16, int64_t n, bool from_input) {
  launch_gelu(s, from_input ? "mul (gelu' of the input)" : "mul", from_input ? 5 : 4,
              {o32, nullptr, o16, nullptr, prod, g32, nullptr, g16, 0}, n);
}
void Kernels::residual(Stream s, float* out, const float* a, const float* b, int64_t n) {
  if (n <= 0) return;
  const bool vec = vec4(n, {out, a, b});
  simt::launch(s, cfg::elementwise(vec ? n / 4 : n), "residual", &residual_kernel, out, a, b, n,
               int(vec));
}
void Kernels::scale(Stream s, float* g32, uint16_t* g16, float f, int64_t n) {
  if (n <= 0) return;
  if (g16)
    simt::launch(s, cfg::elementwise(n), "scale", &scale_kernel<uint16_t>, g16, f, n);
  else
    simt::launch(s, cfg::elementwise(n), "scale", &scale_kernel<float>, g32, f, n);
}
void Kernels::bias_add(Stream s, float* out, const float* bias, int64_t N, int OC) {
  if (N * OC <= 0) return;
  simt::launch(s, cfg::elementwise(N * OC), "bias_add", &bias_add_kernel, out, bias, N * OC, OC);
}
void Kernels::adamw(Stream s, float* p, const float* g, float* mm, float* v, int64_t n,
                    float grad_mult, float lr, float beta1, float beta2, float eps, float decay,
                    float bc1, float bc2_sqrt) {
  if (n <= 0) return;
  simt::launch(s, cfg::elementwise(n), "adamw_update", &adamw_kernel, p, g, mm, v, n, grad_mult, lr,
               beta1, beta2, eps, decay, bc1, bc2_sqrt);
}
void Kernels::adamw_multi(Stream s, const AdamChunk* chunks, int64_t count, float grad_mult,
                          const double* norm_sq, double loss_scale, double clip, float lr,
                          float beta1, float beta2, float eps, float bc1, float bc2_sqrt,
                          int* flag) {
  if (count <= 0) return;
  simt::launch(s, cfg::adamw_multi(count), "adamw_fused", &adamw_multi_kernel, chunks, grad_mult,
               norm_sq, loss_scale, clip, lr, beta1, beta2, eps, bc1, bc2_sqrt, flag);
}
void Kernels::sum_squares(Stream s, double* out, const float* g, int64_t n, double* partial) {
  simt::launch(s, cfg::sum_squares(n), "sum_squares", &sum_squares_kernel, partial, g, n);
  simt::launch(s, cfg::sum_squares_finish(n), "sum_squares (finish)", &sum_squares_finish_kernel,
               out, static_cast<const double*>(partial), cfg::sum_squares_blocks(n));
}
void Kernels::fp8_quantize(Stream s, uint8_t* out, const float* x, int64_t rows, int64_t cols,
                           bool transpose, bool e5m2, float* state, bool first_use) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  if (first_use)  // the scale of the first use is the current amax's: it is needed first
    simt::launch(s, cfg::fp8_amax(n), "fp8_quantize (amax)", &fp8_amax_kernel, state, x, n);
  if (transpose)
    simt::launch(s, cfg::fp8_transpose(rows, cols), "fp8_quantize (transposed)",
                 &fp8_cast_transpose_kernel, out, static_cast<uint8_t*>(nullptr), state, x, rows,
                 cols, int(e5m2));
  else
    simt::launch(s, cfg::elementwise(n), "fp8_quantize", &fp8_cast_kernel, out, state, x, n,
                 int(e5m2));
  simt::launch(s, simt::LaunchConfig{simt::Dim3(1), simt::Dim3(1), 0}, "fp8_quantize (scale)",
               &fp8_update_kernel, state, int(e5m2));
}
void Kernels::fp8_quantize_both(Stream s, uint8_t* out, uint8_t* out_t, const float* x,
                                int64_t rows, int64_t cols, bool e5m2, float* state,
                                bool first_use) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  if (first_use)
    simt::launch(s, cfg::fp8_amax(n), "fp8_quantize (amax)", &fp8_amax_kernel, state, x, n);
  simt::launch(s, cfg::fp8_transpose(rows, cols), "fp8_quantize (both layouts)",
               &fp8_cast_transpose_kernel, out_t, out, state, x, rows, cols, int(e5m2));
  simt::launch(s, simt::LaunchConfig{simt::Dim3(1), simt::Dim3(1), 0}, "fp8_quantize (scale)",
               &fp8_update_kernel, state, int(e5m2));
}

}  // namespace gt::cuda_kernels

#if defined(__CUDACC__)
namespace gt::simt {
void after_launch(cudaStream_t s, const char* kernel) {
  cudaError_t e = cudaGetLastError();
  static const bool sync_check = [] {
    const char* v = std::getenv("GT_CUDA_SYNC_CHECK");
    return v && std::string(v) == "1";
  }();
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (e == cudaSuccess && sync_check && cudaStreamIsCapturing(s, &capturing) == cudaSuccess &&
      capturing == cudaStreamCaptureStatusNone)  // (a capture cannot synchronize)
    e = cudaStreamSynchronize(s);
  if (e != cudaSuccess)
    throw Error(
        fmt::format("CUDA kernel '{}'{}: {} ({})", kernel,
                    sync_check ? " (GT_CUDA_SYNC_CHECK=1: synchronized after the launch)" : "",
                    cudaGetErrorName(e), cudaGetErrorString(e)));
}
void allow_dynamic_smem(const void* kernel, size_t bytes) {
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(bytes));
  if (e != cudaSuccess)
    throw Error(fmt::format("CUDA: cannot give a kernel {} bytes of dynamic shared memory: {}",
                            bytes, cudaGetErrorString(e)));
}
}  // namespace gt::simt
#endif
