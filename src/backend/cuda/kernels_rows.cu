// backend/cuda/kernels_rows.cu: the row kernels of the CUDA backend: LayerNorm (and the fused
// residual + LayerNorm) forward and backward, the bias gradient's column sums, and softmax
// cross-entropy (the fused classifier). A warp per row (LayerNorm) or a block per row (the
// classifier, V ~ 50k), 16-byte loads where the rows allow, statistics in f32 by shuffles,
// and every sum in a fixed order (deterministic on any GPU). Launch shapes: kernel_configs.h.
// Compiled by nvcc (kernels_rows.cu) and by the host compiler on the SIMT runtime
// (kernels_rows_emu.cpp).
#include <fmt/format.h>

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
using cfg::kRowWarps;

/// 4 values stored at p (f32: 16 bytes; bf16: 8 bytes).
__device__ __forceinline__ void store4(float* p, float a, float b, float c, float d) {
  Pack<float> v;
  v.v[0] = a, v.v[1] = b, v.v[2] = c, v.v[3] = d;
  store_pack(p, v);
}
__device__ __forceinline__ void store4(uint16_t* p, float a, float b, float c, float d) {
  uint2 u;
  u.x = uint32_t(bf16_rn(a)) | uint32_t(bf16_rn(b)) << 16;
  u.y = uint32_t(bf16_rn(c)) | uint32_t(bf16_rn(d)) << 16;
  *reinterpret_cast<uint2*>(p) = u;
}

// ---- LayerNorm forward ----------------------------------------------------------------------
/// Row `row` of LayerNorm (eps 1e-5, biased variance) of x = a (res null) or of x = a + b
/// (written to res): out (f32 or bf16), mean, rstd. A warp per row; kPacks > 0: lane l holds
/// the 4-float packs l, l+32, ... (C a multiple of 4, at most 128 kPacks), in registers, so
/// the row is read once; kPacks = 0: any C, the row re-read from the cache.
namespace hot {
template <typename TOut, int kPacks>
__global__ void __launch_bounds__(256)
    layernorm_forward_kernel(TOut* __restrict__ out, float* __restrict__ mean,
                             float* __restrict__ rstd, float* __restrict__ res,
                             const float* __restrict__ a, const float* __restrict__ b,
                             const float* __restrict__ w, const float* __restrict__ bias, int64_t N,
                             int C) {
  const unsigned lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (row >= N) return;  // the whole warp: no collective is left half-joined
  const int64_t o = row * C;
  float m, s;
  if constexpr (kPacks > 0) {
    Pack<float> x[kPacks];
    float sum = 0.f;
    GT_UNROLL
    for (int k = 0; k < kPacks; ++k) {
      const int c = int(lane + 32 * k) * 4;
      if (c < C) {
        x[k] = load_pack(a + o + c);
        if (res) {
          const Pack<float> y = load_pack(b + o + c);
          GT_UNROLL
          for (int i = 0; i < 4; ++i) x[k].v[i] += y.v[i];
          store_pack(res + o + c, x[k]);
        }
        sum += (x[k].v[0] + x[k].v[1]) + (x[k].v[2] + x[k].v[3]);
      }
    }
    m = warp_sum(sum) / C;
    float var = 0.f;
    GT_UNROLL
    for (int k = 0; k < kPacks; ++k) {
      const int c = int(lane + 32 * k) * 4;
      if (c < C) GT_UNROLL
      for (int i = 0; i < 4; ++i) var += (x[k].v[i] - m) * (x[k].v[i] - m);
    }
    s = 1.0f / sqrtf(warp_sum(var) / C + cuda_math::kLnEps);
    GT_UNROLL
    for (int k = 0; k < kPacks; ++k) {
      const int c = int(lane + 32 * k) * 4;
      if (c < C) {
        const Pack<float> wv = load_pack(w + c), bv = load_pack(bias + c);
        store4(out + o + c, (x[k].v[0] - m) * s * wv.v[0] + bv.v[0],
               (x[k].v[1] - m) * s * wv.v[1] + bv.v[1], (x[k].v[2] - m) * s * wv.v[2] + bv.v[2],
               (x[k].v[3] - m) * s * wv.v[3] + bv.v[3]);
      }
    }
  } else {
    const float* x = res ? res + o : a + o;
    float sum = 0.f;
    for (int c = lane; c < C; c += 32) {
      float v = a[o + c];
      if (res) {
        v += b[o + c];
        res[o + c] = v;
      }
      sum += v;
    }
    m = warp_sum(sum) / C;
    float var = 0.f;
    for (int c = lane; c < C; c += 32) var += (x[c] - m) * (x[c] - m);
    s = 1.0f / sqrtf(warp_sum(var) / C + cuda_math::kLnEps);
    for (int c = lane; c < C; c += 32) out[o + c] = from_f<TOut>((x[c] - m) * s * w[c] + bias[c]);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}
}  // namespace hot

template <typename TOut>
void launch_layernorm_forward(Kernels::Stream st, TOut* out, float* mean, float* rstd, float* res,
                              const float* a, const float* b, const float* w, const float* bias,
                              int64_t N, int C, const char* name) {
  if (N <= 0) return;
  const auto lc = cfg::layernorm_forward(N);
  const bool vec = packs_fit<float>(a, C) && packs_fit<float>(w, C) && packs_fit<float>(bias, C) &&
                   (!res || (packs_fit<float>(res, C) && packs_fit<float>(b, C))) &&
                   reinterpret_cast<uintptr_t>(out) % (4 * sizeof(TOut)) == 0;
#define GT_LN(P)                                                                                \
  simt::launch(st, lc, name, &layernorm_forward_kernel<TOut, P>, out, mean, rstd, res, a, b, w, \
               bias, N, C)
  switch (vec ? cfg::layernorm_packs(C, false) : 0) {
    case 2:
      GT_LN(2);
      break;
    case 4:
      GT_LN(4);
      break;
    case 8:
      GT_LN(8);
      break;
    case 16:
      GT_LN(16);
      break;
    default:
      GT_LN(0);
  }
#undef GT_LN
}

// ---- LayerNorm backward ---------------------------------------------------------------------
/// dinp(N,C) += ((w dout) - mean(w dout) - norm mean(w dout norm)) rstd for the block's rows
/// (a warp per row), and partial[block][2C] = this block's sums of norm*dout (the weight
/// gradient) and of dout (the bias gradient): each warp accumulates in its own slice of shared
/// memory, the slices are added in warp order at the end. kPacks as layernorm_forward_kernel.
namespace hot {
template <int kPacks>
__global__ void __launch_bounds__(256)
    layernorm_backward_kernel(float* __restrict__ dinp, float* __restrict__ partial,
                              const float* __restrict__ dout, const float* __restrict__ inp,
                              const float* __restrict__ w, const float* __restrict__ mean,
                              const float* __restrict__ rstd, int64_t N, int C) {
  GT_DYNAMIC_SHARED(float, acc);  // [kRowWarps][2C]: this block's dw (first C), db (next C)
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* dw = acc + int64_t(warp) * 2 * C;
  float* db = dw + C;
  for (int c = lane; c < 2 * C; c += 32) dw[c] = 0.f;
  __syncwarp();
  const int64_t first = int64_t(blockIdx.x) * cfg::kLnBackwardRows;
  const int64_t end = first + cfg::kLnBackwardRows < N ? first + cfg::kLnBackwardRows : N;
  for (int64_t r = first + warp; r < end; r += kRowWarps) {
    const int64_t o = r * C;
    const float m = mean[r], s = rstd[r];
    if constexpr (kPacks > 0) {
      Pack<float> d[kPacks], x[kPacks];
      float s1 = 0.f, s2 = 0.f;
      GT_UNROLL
      for (int k = 0; k < kPacks; ++k) {
        const int c = int(lane + 32 * k) * 4;
        if (c < C) {
          d[k] = load_pack(dout + o + c);
          x[k] = load_pack(inp + o + c);
          const Pack<float> wv = load_pack(w + c);
          GT_UNROLL
          for (int i = 0; i < 4; ++i) {
            const float norm = (x[k].v[i] - m) * s, dn = wv.v[i] * d[k].v[i];
            s1 += dn;
            s2 += dn * norm;
            dw[c + i] += norm * d[k].v[i];
            db[c + i] += d[k].v[i];
            x[k].v[i] = norm;
            d[k].v[i] = dn;
          }
        }
      }
      s1 = warp_sum(s1) / C;
      s2 = warp_sum(s2) / C;
      GT_UNROLL
      for (int k = 0; k < kPacks; ++k) {
        const int c = int(lane + 32 * k) * 4;
        if (c < C) {
          Pack<float> g = load_pack(dinp + o + c);
          GT_UNROLL
          for (int i = 0; i < 4; ++i) g.v[i] += (d[k].v[i] - s1 - x[k].v[i] * s2) * s;
          store_pack(dinp + o + c, g);
        }
      }
    } else {
      float s1 = 0.f, s2 = 0.f;
      for (int c = lane; c < C; c += 32) {
        const float norm = (inp[o + c] - m) * s, dn = w[c] * dout[o + c];
        s1 += dn;
        s2 += dn * norm;
        dw[c] += norm * dout[o + c];
        db[c] += dout[o + c];
      }
      s1 = warp_sum(s1) / C;
      s2 = warp_sum(s2) / C;
      for (int c = lane; c < C; c += 32) {
        const float norm = (inp[o + c] - m) * s;
        dinp[o + c] += (w[c] * dout[o + c] - s1 - norm * s2) * s;
      }
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) {
    float t = 0.f;
    for (unsigned k = 0; k < kRowWarps; ++k) t += acc[int64_t(k) * 2 * C + c];
    partial[int64_t(blockIdx.x) * 2 * C + c] = t;
  }
}
}  // namespace hot

/// out[c] += sum over k < K of partial[k*stride + c], in order of k (column c < columns);
/// out2, when given, takes the columns from `split` on (LayerNorm's db after its dw).
__global__ void column_finish_kernel(float* __restrict__ out, float* __restrict__ out2,
                                     const float* __restrict__ partial, int64_t K, int64_t stride,
                                     int64_t columns, int64_t split) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += int64_t(gridDim.x) * blockDim.x) {
    float t = 0.f;
    for (int64_t k = 0; k < K; ++k) t += partial[k * stride + c];
    if (c < split)
      out[c] += t;
    else
      out2[c - split] += t;
  }
}

// ---- column sums (the bias gradient) ----------------------------------------------------------
/// partial[chunk][c] = sum of x[r][c] over the chunk's kColumnRows rows; a thread per pack of
/// columns (vector: 16-byte loads), grid.y over the row chunks.
namespace hot {
template <typename T, bool kVec>
__global__ void column_partial_kernel(float* __restrict__ partial, const T* __restrict__ x,
                                      int64_t N, int C) {
  constexpr int P = Pack<T>::N;
  const int64_t c0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * P;
  if (c0 >= C) return;
  const int64_t r0 = int64_t(blockIdx.y) * cfg::kColumnRows;
  const int64_t r1 = r0 + cfg::kColumnRows < N ? r0 + cfg::kColumnRows : N;
  float s[P];
  for (int i = 0; i < P; ++i) s[i] = 0.f;
  for (int64_t r = r0; r < r1; ++r) {
    if constexpr (kVec) {
      const Pack<T> v = load_pack(x + r * C + c0);
      GT_UNROLL
      for (int i = 0; i < P; ++i) s[i] += v.get(i);
    } else {
      for (int i = 0; i < P && c0 + i < C; ++i) s[i] += to_f(x[r * C + c0 + i]);
    }
  }
  for (int i = 0; i < P && c0 + i < C; ++i) partial[int64_t(blockIdx.y) * C + c0 + i] = s[i];
}
}  // namespace hot

template <typename T>
void launch_column_sums(Kernels::Stream st, float* out, const T* x, int64_t N, int C,
                        float* partial) {
  if (N <= 0 || C <= 0) return;
  constexpr int P = Pack<T>::N;
  const auto lc = cfg::column_sums(N, C, P);
  if (packs_fit<T>(x, C))
    simt::launch(st, lc, "column_sums (partial)", &column_partial_kernel<T, true>, partial, x, N,
                 C);
  else
    simt::launch(st, lc, "column_sums (partial)", &column_partial_kernel<T, false>, partial, x, N,
                 C);
  simt::launch(st, cfg::column_finish(C), "column_sums", &column_finish_kernel, out,
               static_cast<float*>(nullptr), static_cast<const float*>(partial),
               cfg::column_chunks(N), int64_t(C), int64_t(C), int64_t(C));
}

// ---- softmax cross-entropy --------------------------------------------------------------------
/// Online (max, sum of exp) of the elements a thread sees, then of the block: every thread
/// gets the row's log-sum-exp. NaN anywhere makes it NaN (and the loss, and the gradient).
struct MaxSum {
  float m = -INFINITY, s = 0.f;
  __device__ __forceinline__ void add(float x) {
    if (x != x) m = s = NAN;               // NaN poisons the row, whatever else it holds
    if (x == -INFINITY || m != m) return;  // exp(-inf) adds nothing
    if (x > m) {
      s = s * expf(m - x) + 1.0f;
      m = x;
    } else {
      s += expf(x - m);
    }
  }
  __device__ __forceinline__ void merge(float m2, float s2) {
    if (m != m || m2 != m2) {
      m = s = NAN;
      return;
    }
    const float mm = fmaxf(m, m2);
    if (mm == -INFINITY) return;  // both empty
    s = (m == -INFINITY ? 0.f : s * expf(m - mm)) + (m2 == -INFINITY ? 0.f : s2 * expf(m2 - mm));
    m = mm;
  }
};
__device__ float block_logsumexp(MaxSum t, float* sm, float* ss) {
  GT_UNROLL
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(kFullMask, t.m, o), s2 = __shfl_xor_sync(kFullMask, t.s, o);
    t.merge(m2, s2);
  }
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (lane == 0) {
    sm[warp] = t.m;
    ss[warp] = t.s;
  }
  __syncthreads();
  MaxSum u;
  if (lane < warps) u.m = sm[lane], u.s = ss[lane];
  GT_UNROLL
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(kFullMask, u.m, o), s2 = __shfl_xor_sync(kFullMask, u.s, o);
    u.merge(m2, s2);
  }
  return u.m + logf(u.s);
}

/// Row blockIdx.x: losses[row] = lse - logit[target]; then, fused (probs null): the row is
/// overwritten in place with (softmax - onehot(target)) * dloss; unfused: probs = softmax.
/// kVec: the row in 16-byte packs (V a multiple of the pack, the row aligned).
namespace hot {
template <typename T, bool kVec>
__global__ void __launch_bounds__(1024)
    classifier_kernel(T* __restrict__ logits, float* __restrict__ probs, float* __restrict__ losses,
                      const int32_t* __restrict__ targets, float dloss, int V) {
  GT_SHARED(float, sm, 32);
  GT_SHARED(float, ss, 32);
  const int64_t row = blockIdx.x;
  T* l = logits + row * V;
  const int32_t t = targets[row];
  const float lt = threadIdx.x == 0 ? to_f(l[t]) : 0.f;  // read before any write to the row
  constexpr int P = Pack<T>::N;
  MaxSum ms;
  if constexpr (kVec) {
    for (int c = threadIdx.x * P; c < V; c += blockDim.x * P) {
      const Pack<T> v = load_pack(l + c);
      GT_UNROLL
      for (int i = 0; i < P; ++i) ms.add(v.get(i));
    }
  } else {
    for (int c = threadIdx.x; c < V; c += blockDim.x) ms.add(to_f(l[c]));
  }
  const float lse = block_logsumexp(ms, sm, ss);
  if (threadIdx.x == 0) losses[row] = lse - lt;
  __syncthreads();  // every thread has read its part of the row before it is overwritten
  if (probs) {
    float* p = probs + row * V;
    for (int c = threadIdx.x; c < V; c += blockDim.x) p[c] = expf(to_f(l[c]) - lse);
    return;
  }
  if constexpr (kVec) {
    for (int c = threadIdx.x * P; c < V; c += blockDim.x * P) {
      Pack<T> v = load_pack(l + c);
      GT_UNROLL
      for (int i = 0; i < P; ++i)
        v.set(i, (expf(v.get(i) - lse) - (c + i == t ? 1.0f : 0.0f)) * dloss);
      store_pack(l + c, v);
    }
  } else {
    for (int c = threadIdx.x; c < V; c += blockDim.x)
      l[c] = from_f<T>((expf(to_f(l[c]) - lse) - (c == t ? 1.0f : 0.0f)) * dloss);
  }
}
}  // namespace hot

/// dlogits(N,V) = (probs - onehot(target)) * dloss, element-wise (grid-stride).
__global__ void softmax_backward_kernel(float* __restrict__ dlogits,
                                        const float* __restrict__ probs,
                                        const int32_t* __restrict__ targets, float dloss, int64_t N,
                                        int V) {
  const int64_t n = N * V;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / V, j = i % V;
    dlogits[i] = (probs[i] - (j == targets[r] ? 1.0f : 0.0f)) * dloss;
  }
}

}  // namespace

// ---- the launchers ----------------------------------------------------------------------------
void Kernels::layernorm_forward(Stream s, float* o32, uint16_t* o16, float* mean, float* rstd,
                                const float* inp, const float* w, const float* b, int64_t N,
                                int C) {
  if (o16)
    launch_layernorm_forward(s, o16, mean, rstd, nullptr, inp, nullptr, w, b, N, C,
                             "layernorm_forward");
  else
    launch_layernorm_forward(s, o32, mean, rstd, nullptr, inp, nullptr, w, b, N, C,
                             "layernorm_forward");
}
void Kernels::residual_layernorm_forward(Stream s, float* res, float* o32, uint16_t* o16,
                                         float* mean, float* rstd, const float* a, const float* b,
                                         const float* w, const float* bias, int64_t N, int C) {
  if (o16)
    launch_layernorm_forward(s, o16, mean, rstd, res, a, b, w, bias, N, C,
                             "residual_layernorm_forward");
  else
    launch_layernorm_forward(s, o32, mean, rstd, res, a, b, w, bias, N, C,
                             "residual_layernorm_forward");
}
int64_t Kernels::layernorm_partial_floats(int64_t N, int C) {
  return configs::layernorm_backward_blocks(N) * 2 * C;
}
void Kernels::layernorm_backward(Stream s, float* dinp, float* dw, float* db, const float* dout,
                                 const float* inp, const float* w, const float* mean,
                                 const float* rstd, int64_t N, int C, float* partial) {
  if (N <= 0) return;
  const auto lc = cfg::layernorm_backward(N, C);
  const bool vec = packs_fit<float>(dinp, C) && packs_fit<float>(dout, C) &&
                   packs_fit<float>(inp, C) && packs_fit<float>(w, C);
#define GT_LNB(P)                                                                               \
  simt::launch(s, lc, "layernorm_backward", &layernorm_backward_kernel<P>, dinp, partial, dout, \
               inp, w, mean, rstd, N, C)
  switch (vec ? cfg::layernorm_packs(C, true) : 0) {
    case 2:
      GT_LNB(2);
      break;
    case 4:
      GT_LNB(4);
      break;
    case 8:
      GT_LNB(8);
      break;
    default:
      GT_LNB(0);
  }
#undef GT_LNB
  simt::launch(s, cfg::column_finish(2 * int64_t(C)), "layernorm_backward (dw, db)",
               &column_finish_kernel, dw, db, static_cast<const float*>(partial),
               cfg::layernorm_backward_blocks(N), 2 * int64_t(C), 2 * int64_t(C), int64_t(C));
}
int64_t Kernels::column_partial_floats(int64_t N, int C) { return cfg::column_chunks(N) * C; }
void Kernels::column_sums(Stream s, float* out, const float* x32, const uint16_t* x16, int64_t N,
                          int C, float* partial) {
  if (x16)
    launch_column_sums(s, out, x16, N, C, partial);
  else
    launch_column_sums(s, out, x32, N, C, partial);
}

void Kernels::softmax_ce_forward(Stream s, float* probs, float* losses, const float* logits,
                                 const int32_t* targets, int64_t N, int V) {
  if (N <= 0) return;
  auto* l = const_cast<float*>(logits);  // read only: the unfused form writes probs
  if (packs_fit<float>(logits, V))
    simt::launch(s, cfg::classifier(N, V, 4), "softmax_crossentropy_forward",
                 &classifier_kernel<float, true>, l, probs, losses, targets, 1.0f, V);
  else
    simt::launch(s, cfg::classifier(N, V, 1), "softmax_crossentropy_forward",
                 &classifier_kernel<float, false>, l, probs, losses, targets, 1.0f, V);
}
void Kernels::softmax_ce_backward(Stream s, float* dlogits, const float* probs,
                                  const int32_t* targets, float dloss, int64_t N, int V) {
  simt::launch(s, cfg::elementwise(N * V), "softmax_crossentropy_backward",
               &softmax_backward_kernel, dlogits, probs, targets, dloss, N, V);
}
namespace {
template <typename T>
void launch_classifier_fused(Kernels::Stream s, T* logits, float* losses, const int32_t* targets,
                             float dloss, int64_t N, int V) {
  float* none = nullptr;
  if (packs_fit<T>(logits, V))
    simt::launch(s, cfg::classifier(N, V, Pack<T>::N), "softmax_crossentropy_fused",
                 &classifier_kernel<T, true>, logits, none, losses, targets, dloss, V);
  else
    simt::launch(s, cfg::classifier(N, V, 1), "softmax_crossentropy_fused",
                 &classifier_kernel<T, false>, logits, none, losses, targets, dloss, V);
}
}  // namespace
void Kernels::softmax_ce_fused(Stream s, float* l32, uint16_t* l16, float* losses,
                               const int32_t* targets, float dloss, int64_t N, int V) {
  if (N <= 0) return;
  if (l16)
    launch_classifier_fused(s, l16, losses, targets, dloss, N, V);
  else
    launch_classifier_fused(s, l32, losses, targets, dloss, N, V);
}

}  // namespace gt::cuda_kernels
