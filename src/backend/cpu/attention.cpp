#include "backend/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/amx_matmul.h"
#include "backend/cpu/attention_bf16.h"
#include "backend/cpu/fast_math.h"
#include "backend/cpu/onednn_matmul.h"
#include "backend/cpu/simd512.h"

namespace gt::cpu {
namespace {

size_t elem_bytes(AttnType t) { return t == AttnType::bf16 || t == AttnType::f16 ? 2 : 4; }

MmType mm_type(AttnType t) {
  return t == AttnType::bf16 ? MmType::bf16 : t == AttnType::f16 ? MmType::f16 : MmType::f32;
}

/// n floats into an operand buffer of type t.
void store_row(void* dst, const float* x, int64_t n, AttnType t) {
  switch (t) {
    case AttnType::f32:
      std::memcpy(dst, x, n * sizeof(float));
      break;
    case AttnType::f32_half: {
      float* o = static_cast<float*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(static_cast<_Float16>(x[i]));
      break;
    }
    case AttnType::bf16:
      store_bf16(static_cast<uint16_t*>(dst), x, n);
      break;
    case AttnType::f16: {
      uint16_t* o = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = to_f16(x[i]);
      break;
    }
    case AttnType::f32_bf16: {
      float* o = static_cast<float*>(dst);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = bf16_to_float(to_bf16(x[i]));
      break;
    }
  }
}

#if GT_SIMD512
/// softmax_row for f32 (low == null) and bf16 rows, 16 lanes with a masked last vector.
float softmax_row512(float* a, int64_t valid, int64_t width, uint16_t* low, bool keep_f32) {
  float maxv;
  const float sum = exp_minus_max_row512(a, valid, maxv);
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  const bool f32_out = !low || keep_f32;
  for (int64_t i = 0; i < width; i += 16) {
    const __mmask16 w = lanes_below(i, width);
    const __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes_below(i, valid), a + i), inv);
    if (low) store_bf16_512(low + i, w, y);
    if (f32_out) _mm512_mask_storeu_ps(a + i, w, y);
  }
  return maxv + std::log(sum);
}

/// softmax_backward_row for f32 (pl, dsl null) and bf16 rows, 16 lanes at a time.
void softmax_backward_row512(float* p, float* g, int64_t valid, int64_t width, const float* lse,
                             float scale, uint16_t* pl, uint16_t* dsl) {
  const __m512 l = _mm512_set1_ps(lse ? *lse : 0.0f);
  __m512 vd = _mm512_setzero_ps();
  for (int64_t i = 0; i < valid; i += 16) {
    const __mmask16 m = lanes_below(i, valid);
    __m512 x = _mm512_maskz_loadu_ps(m, p + i);
    if (lse) {
      x = _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(x, l)));
      _mm512_mask_storeu_ps(p + i, m, x);
    }
    vd = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m, g + i), vd);
  }
  const __m512 dot = _mm512_set1_ps(_mm512_reduce_add_ps(vd)), sc = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < width; i += 16) {
    const __mmask16 w = lanes_below(i, width), m = lanes_below(i, valid);
    const __m512 x = _mm512_maskz_loadu_ps(m, p + i);
    const __m512 ds = _mm512_maskz_mul_ps(
        m, _mm512_mul_ps(x, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, g + i), dot)), sc);
    if (lse) _mm512_mask_storeu_ps(p + i, w & ~m, x);  // zeros past the valid columns
    if (pl) {
      store_bf16_512(pl + i, w, x);
      store_bf16_512(dsl + i, w, ds);
    } else {
      _mm512_mask_storeu_ps(g + i, w, ds);
    }
  }
}
#endif

/// Causal softmax of one score row a[0..width): columns 0..valid-1 count, the rest become 0.
/// Without a 16-bit copy (low == null) a is normalised in place. With one, the normalised row
/// is written to low (type t) and a is normalised too only when keep_f32 (the stored att).
/// Returns the log-sum-exp of a[0..valid).
float softmax_row(float* a, int64_t valid, int64_t width, unsigned char* low, bool keep_f32,
                  AttnType t) {
#if GT_SIMD512
  if (t == AttnType::f32 || (t == AttnType::bf16 && low))
    return softmax_row512(a, valid, width, reinterpret_cast<uint16_t*>(low), keep_f32);
#endif
  const float maxv = row_max(a, valid);
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < valid; ++i) {
    const float e = exp_approx(a[i] - maxv);
    a[i] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
  if (low && t == AttnType::bf16) {
    uint16_t* o = reinterpret_cast<uint16_t*>(low);
#pragma omp simd
    for (int64_t i = 0; i < valid; ++i) {
      const float x = a[i] * inv;
      o[i] = to_bf16(x);
      if (keep_f32) a[i] = x;
    }
    std::fill(o + valid, o + width, uint16_t(0));
    if (keep_f32) std::fill(a + valid, a + width, 0.0f);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < valid; ++i) a[i] *= inv;
    std::fill(a + valid, a + width, 0.0f);
    if (low) store_row(low, a, width, t);
  }
  return maxv + std::log(sum);
}

/// Backward of one row. p: the probabilities (width, zeros past valid); when lse is given,
/// p holds the scaled scores instead and is turned into probabilities first. g: dP in, and
/// without 16-bit copies dS = p (g - sum(p g)) scale out; with them (pl, dsl non-null) p and
/// dS are written there in type t and g is left as it was.
void softmax_backward_row(float* p, float* g, int64_t valid, int64_t width, const float* lse,
                          float scale, unsigned char* pl, unsigned char* dsl, AttnType t) {
#if GT_SIMD512
  if (t == AttnType::f32 || (t == AttnType::bf16 && pl))
    return softmax_backward_row512(p, g, valid, width, lse, scale, reinterpret_cast<uint16_t*>(pl),
                                   reinterpret_cast<uint16_t*>(dsl));
#endif
  float dot = 0.f;
  if (lse) {
    const float l = *lse;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < valid; ++i) {
      p[i] = exp_approx(p[i] - l);
      dot += p[i] * g[i];
    }
    std::fill(p + valid, p + width, 0.0f);
  } else {
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < valid; ++i) dot += p[i] * g[i];
  }
  if (!pl) {
#pragma omp simd
    for (int64_t i = 0; i < valid; ++i) g[i] = p[i] * (g[i] - dot) * scale;
    std::fill(g + valid, g + width, 0.0f);
    return;
  }
  store_row(pl, p, width, t);
  if (t == AttnType::bf16) {
    uint16_t* o = reinterpret_cast<uint16_t*>(dsl);
#pragma omp simd
    for (int64_t i = 0; i < valid; ++i) o[i] = to_bf16(p[i] * (g[i] - dot) * scale);
    std::fill(o + valid, o + width, uint16_t(0));
  } else {
    float tmp[64];
    const size_t es = elem_bytes(t);
    for (int64_t i0 = 0; i0 < width; i0 += 64) {
      const int64_t n = std::min<int64_t>(64, width - i0);
      for (int64_t i = 0; i < n; ++i)
        tmp[i] = i0 + i < valid ? p[i0 + i] * (g[i0 + i] - dot) * scale : 0.0f;
      store_row(dsl + i0 * es, tmp, n, t);
    }
  }
}

/// dst[0..n) = src[0..n), with streaming stores (no read for ownership, not kept in cache)
/// where dst is 64-byte aligned and n a multiple of 16: the output rows are written once
/// here, and read by a later op. Call stream_fence() before other threads read dst.
inline void copy_row_stream(float* dst, const float* src, int64_t n) {
#if GT_SIMD512
  if ((reinterpret_cast<uintptr_t>(dst) & 63) == 0 && n % 16 == 0) {
    for (int64_t i = 0; i < n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
    return;
  }
#endif
  std::memcpy(dst, src, n * sizeof(float));
}
inline void stream_fence() {
#if GT_SIMD512
  _mm_sfence();
#endif
}

/// One head's shape and its packing between the strided (B,T,3C)/(B,T,C) tensors and dense
/// (T,hs) blocks.
struct Head {
  int64_t T, C, C3, hs, NH;
  AttnType type;
  size_t es;
  bool low;
  Head(int T_, int C_, int NH_, AttnType t)
      : T(T_),
        C(C_),
        C3(3 * (int64_t)C_),
        hs(C_ / NH_),
        NH(NH_),
        type(t),
        es(elem_bytes(t)),
        low(t != AttnType::f32) {}
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(hs)); }

  /// q, k, v of one head from T rows of 3C (each row's three slices together, the rows two
  /// ahead prefetched: they are 3C elements apart, too far for the hardware prefetcher). bf16
  /// rows are copied as they are for bf16 operands, widened (exactly) and stored as f32 ones
  /// for the other types.
  void pack_qkv(unsigned char* q, unsigned char* k, unsigned char* v, QkvRows qkv) const {
    if (qkv.bf16) {
      std::vector<float> w(type == AttnType::bf16 ? 0 : hs);
      for (int64_t t = 0; t < T; ++t) {
        const uint16_t* r = qkv.bf16 + t * C3;
        unsigned char* dst[3] = {q + t * hs * es, k + t * hs * es, v + t * hs * es};
        for (int p = 0; p < 3; ++p) {
          if (type == AttnType::bf16) {
            std::memcpy(dst[p], r + p * C, hs * sizeof(uint16_t));
            continue;
          }
          for (int64_t x = 0; x < hs; ++x) w[x] = bf16_to_float(r[p * C + x]);
          store_row(dst[p], w.data(), hs, type);
        }
      }
      return;
    }
    const float* rows = qkv.f32;
    for (int64_t t = 0; t < T; ++t) {
      const float* r = rows + t * C3;
      if (t + 2 < T)
        for (int p = 0; p < 3; ++p)
          for (int64_t x = 0; x < hs; x += 16) __builtin_prefetch(r + 2 * C3 + p * C + x);
      if (type == AttnType::bf16) {  // the hot case, inlined
        store_bf16(reinterpret_cast<uint16_t*>(q) + t * hs, r, hs);
        store_bf16(reinterpret_cast<uint16_t*>(k) + t * hs, r + C, hs);
        store_bf16(reinterpret_cast<uint16_t*>(v) + t * hs, r + 2 * C, hs);
      } else {
        store_row(q + t * hs * es, r, hs, type);
        store_row(k + t * hs * es, r + C, hs, type);
        store_row(v + t * hs * es, r + 2 * C, hs, type);
      }
    }
  }
  /// T rows of hs floats (row stride ld) into dst (T,hs) dense.
  void pack(unsigned char* dst, const float* src, int64_t ld) const {
    if (type == AttnType::bf16) {
      for (int64_t t = 0; t < T; ++t)
        store_bf16(reinterpret_cast<uint16_t*>(dst) + t * hs, src + t * ld, hs);
      return;
    }
    for (int64_t t = 0; t < T; ++t) store_row(dst + t * hs * es, src + t * ld, hs, type);
  }
  /// m dense rows of hs floats at src into rows of stride ld at dst and dst16 (each may be
  /// null).
  void unpack(float* dst, uint16_t* dst16, const float* src, int64_t m, int64_t ld) const {
    for (int64_t t = 0; t < m; ++t) {
      if (dst) copy_row_stream(dst + t * ld, src + t * hs, hs);
      if (dst16) store_bf16(dst16 + t * ld, src + t * hs, hs);
    }
  }
};

/// Lays out a thread's buffer: take(bytes) returns 64-byte aligned offsets.
struct Layout {
  size_t at = 0;
  size_t take(size_t bytes) {
    size_t off = at;
    at += (bytes + 63) / 64 * 64;
    return off;
  }
};

/// The stored form (att kept): whole (T,T) products of one head.
struct StoredPlan : Head {
  const ThreadMatmul *S, *O, *dP, *dV;  // dQ has O's shape, dK dV's
  size_t q, k, v, d, o, dp, pl, dsl, scratch, total;

  StoredPlan(int T_, int C_, int NH_, AttnType t) : Head(T_, C_, NH_, t) {
    const MmType mt = mm_type(t);
    // S(T,T) = scale q k^T; O(T,hs) = P v; dP = dO v^T; dV = P^T dO, dQ = dS k, dK = dS^T q.
    // Outputs are dense and copied into the strided rows after: oneDNN 2.6 has no brgemm
    // for a strided destination.
    S = &thread_matmul(T, T, hs, hs, false, hs, true, T, scale(), mt);
    O = &thread_matmul(T, hs, T, T, false, hs, false, hs, 1.0f, mt);
    dP = &thread_matmul(T, T, hs, hs, false, hs, true, T, 1.0f, mt);
    dV = &thread_matmul(T, hs, T, T, true, hs, false, hs, 1.0f, mt);
    Layout l;
    const size_t head = T * hs * es, sq = T * T;
    q = l.take(head);
    k = l.take(head);
    v = l.take(head);
    d = l.take(head);
    o = l.take(T * hs * sizeof(float));
    dp = l.take(sq * sizeof(float));
    pl = low ? l.take(sq * es) : 0;
    dsl = low ? l.take(sq * es) : 0;
    size_t sp = 0;
    for (auto* m : {S, O, dP, dV}) sp = std::max(sp, m->scratchpad_bytes());
    scratch = l.take(sp);
    total = l.at;
  }
};

/// The fused form: causal query blocks of kBlock rows. Block i (rows r0..r1-1) needs keys
/// 0..r1-1 only, so the products skip the masked upper triangle (for T = 256: a quarter of
/// the square's FLOPs) and the scores of a block, (kBlock, r1), are all a thread keeps.
/// 128 rows: at T = 256, head size 64, blocks of 128 ran the forward 15 % and the backward
/// 25 % faster than blocks of 64 (half the oneDNN calls, each a few microseconds of set-up),
/// and faster than 96 or one block of 256.
constexpr int64_t kBlock = 128;

struct BlockPlan : Head {
  struct Products {
    const ThreadMatmul *S, *O, *dP, *dV;  // dQ has O's shape, dK dV's
  };
  int64_t nblocks;
  std::vector<Products> blk;
  size_t q, k, v, d, o, dk, dv, s, dp, pl, dsl, scratch, total;

  BlockPlan(int T_, int C_, int NH_, AttnType t)
      : Head(T_, C_, NH_, t), nblocks((T_ + kBlock - 1) / kBlock) {
    const MmType mt = mm_type(t);
    size_t sp = 0;
    for (int64_t i = 0; i < nblocks; ++i) {
      const int64_t m = rows(i), n = keys(i);
      Products p;
      p.S = &thread_matmul(m, n, hs, hs, false, hs, true, n, scale(), mt);      // q_i k^T
      p.O = &thread_matmul(m, hs, n, n, false, hs, false, hs, 1.0f, mt);        // P_i v
      p.dP = &thread_matmul(m, n, hs, hs, false, hs, true, n, 1.0f, mt);        // dO_i v^T
      p.dV = &thread_matmul(n, hs, m, n, true, hs, false, hs, 1.0f, mt, true);  // += P_i^T dO_i
      for (auto* x : {p.S, p.O, p.dP, p.dV}) sp = std::max(sp, x->scratchpad_bytes());
      blk.push_back(p);
    }
    Layout l;
    const size_t head = T * hs * es, headf = T * hs * sizeof(float);
    const size_t tile = std::min(kBlock, T) * T;
    q = l.take(head);
    k = l.take(head);
    v = l.take(head);
    d = l.take(head);
    o = l.take(headf);
    dk = l.take(headf);
    dv = l.take(headf);
    s = l.take(tile * sizeof(float));
    dp = l.take(tile * sizeof(float));
    pl = low ? l.take(tile * es) : 0;
    dsl = low ? l.take(tile * es) : 0;
    scratch = l.take(sp);
    total = l.at;
  }
  int64_t r0(int64_t i) const { return i * kBlock; }
  int64_t rows(int64_t i) const { return std::min(T, r0(i) + kBlock) - r0(i); }
  int64_t keys(int64_t i) const { return r0(i) + rows(i); }
};

/// Whether attention_bf16.h's own kernels (no oneDNN call) can run the fused form: bf16
/// operands on a CPU with AVX512_BF16, and a head size they take.
bool bf16_kernels_take(AttnType t, int C, int NH) {
  return t == AttnType::bf16 && C % NH == 0 && attn_bf16_supported(C / NH);
}

/// Whether the fused form runs on the own kernels under AttnKernels k.
bool bf16_kernels(AttnKernels k, AttnType t, int T, int C, int NH) {
  if (k == AttnKernels::onednn || !bf16_kernels_take(t, C, NH)) return false;
  return k == AttnKernels::own || own_bf16_kernels_faster(T, C / NH);
}

}  // namespace

/// T x hs up to which the own kernels are the faster form where oneDNN runs on AMX, with their
/// products on AMX tiles or on the vector unit (bench/attention_bf16.cpp; the figures are in
/// own_bf16_kernels_faster's comment).
constexpr int64_t kOwnTilesMaxOnAmx = 65536, kOwnVectorMaxOnAmx = 4096;
int64_t own_max_on_amx() { return own_amx_enabled() ? kOwnTilesMaxOnAmx : kOwnVectorMaxOnAmx; }

bool own_bf16_kernels_faster(int T, int hs) {
  return !onednn_uses_amx() || static_cast<int64_t>(T) * hs <= own_max_on_amx();
}

AttnType attn_type_on_this_cpu(AttnType t) {
  if (t == AttnType::bf16 && !onednn_supports(MmType::bf16)) return AttnType::f32_bf16;
  if (t == AttnType::f16 && !onednn_supports(MmType::f16)) return AttnType::f32_half;
  return t;
}

size_t attention_workspace_bytes(int T, int C, int NH, AttnType type, bool fused, int threads) {
  type = attn_type_on_this_cpu(type);
  if (fused && bf16_kernels_take(type, C, NH)) {
    // AttnKernels::fastest at T, and at the fewer rows of a shorter call (sampling), which may
    // run the own kernels where T runs oneDNN's products: the larger of the two buffers
    // (here T x hs > own_max_on_amx(), so the own kernels take at most own_max_on_amx() / hs
    // rows)
    const int hs = C / NH;
    if (own_bf16_kernels_faster(T, hs)) return attn_bf16_head_bytes(T, hs) * threads;
    return std::max(BlockPlan(T, C, NH, type).total,
                    attn_bf16_head_bytes(static_cast<int>(own_max_on_amx() / hs), hs)) *
           threads;
  }
  return (fused ? BlockPlan(T, C, NH, type).total : StoredPlan(T, C, NH, type).total) * threads;
}

bool Attention::uses_own_bf16_kernels(int T, int C, int NH) const {
  return bf16_kernels(kernels_, type_, T, C, NH);
}

template <class F>
void Attention::for_heads(size_t bytes, int B, int NH, F f) {
  const int nt = omp_get_max_threads();
  // the team may shrink and grow again (cpu/thread_team.h): buffers are kept for the largest
  if ((int)per_thread_.size() < nt) per_thread_.resize(nt);
#pragma omp parallel
  {
    unsigned char* buf = thread_buffer(omp_get_thread_num(), bytes);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h) f(buf, b, h);
    stream_fence();  // this thread's streaming stores, before anyone reads the results
  }
}

template <class Plan, class F>
void Attention::each_head(const Plan& pl, QkvRows qkv, int B, int NH, F f) {
  for_heads(pl.total, B, NH, [&](unsigned char* buf, int b, int h) {
    pl.pack_qkv(buf + pl.q, buf + pl.k, buf + pl.v, qkv + ((int64_t)b * pl.T * pl.C3 + h * pl.hs));
    f(buf, b, h);
  });
}

unsigned char* Attention::thread_buffer(int thread, size_t bytes) {
  auto& b = per_thread_[thread];
  if (b.size() != bytes) b = AlignedVector<unsigned char>(bytes);
  return b.data();
}

bool Attention::takes_bf16_qkv(int C, int NH) {
  return NH > 0 && C % NH == 0 && attn_type_on_this_cpu(AttnType::bf16) == AttnType::bf16;
}

void Attention::forward(float* out, float* att, float* lse, QkvRows qkv, int B, int T, int C,
                        int NH, uint16_t* out16) {
  if (!att) return forward_blocks(out, lse, qkv, B, T, C, NH, out16);
  const StoredPlan pl(T, C, NH, type_);
  each_head(pl, qkv, B, NH, [&](unsigned char* buf, int b, int h) {
    float* o = reinterpret_cast<float*>(buf + pl.o);
    float* P = att + ((int64_t)b * NH + h) * T * T;
    pl.S->run(P, buf + pl.q, buf + pl.k, buf + pl.scratch);
    for (int64_t t = 0; t < T; ++t) {
      const float l = softmax_row(P + t * T, t + 1, T,
                                  pl.low ? buf + pl.pl + t * T * pl.es : nullptr, true, pl.type);
      if (lse) lse[((int64_t)b * NH + h) * T + t] = l;
    }
    pl.O->run(o, pl.low ? buf + pl.pl : (void*)P, buf + pl.v, buf + pl.scratch);
    const int64_t at = (int64_t)b * T * C + h * pl.hs;
    pl.unpack(out ? out + at : nullptr, out16 ? out16 + at : nullptr, o, T, C);
  });
}

void Attention::backward(float* dqkv, const float* dout, QkvRows qkv, const float* att,
                         const float* lse, int B, int T, int C, int NH, uint16_t* dqkv16) {
  if (!att) return backward_blocks(dqkv, dout, qkv, lse, B, T, C, NH, dqkv16);
  const StoredPlan pl(T, C, NH, type_);
  each_head(pl, qkv, B, NH, [&](unsigned char* buf, int b, int h) {
    float* dP = reinterpret_cast<float*>(buf + pl.dp);
    float* o = reinterpret_cast<float*>(buf + pl.o);
    pl.pack(buf + pl.d, dout + (int64_t)b * T * C + h * pl.hs, C);
    // the stored probabilities are read, not written: copy-free for f32 operands
    float* P = const_cast<float*>(att) + ((int64_t)b * NH + h) * T * T;
    pl.dP->run(dP, buf + pl.d, buf + pl.v, buf + pl.scratch);
    for (int64_t t = 0; t < T; ++t)
      softmax_backward_row(P + t * T, dP + t * T, t + 1, T, nullptr, pl.scale(),
                           pl.low ? buf + pl.pl + t * T * pl.es : nullptr,
                           pl.low ? buf + pl.dsl + t * T * pl.es : nullptr, pl.type);
    const void* Pm = pl.low ? buf + pl.pl : (const void*)P;
    const void* dS = pl.low ? buf + pl.dsl : (const void*)dP;
    const int64_t at = (int64_t)b * T * pl.C3 + h * pl.hs;
    uint16_t* d16 = dqkv16 ? dqkv16 + at : nullptr;
    pl.dV->run(o, Pm, buf + pl.d, buf + pl.scratch);  // dV = P^T dO
    float* dq = dqkv ? dqkv + at : nullptr;
    pl.unpack(dq ? dq + 2 * C : nullptr, d16 ? d16 + 2 * C : nullptr, o, T, pl.C3);
    pl.O->run(o, dS, buf + pl.k, buf + pl.scratch);  // dQ = dS k
    pl.unpack(dq, d16, o, T, pl.C3);
    pl.dV->run(o, dS, buf + pl.q, buf + pl.scratch);  // dK = dS^T q
    pl.unpack(dq ? dq + C : nullptr, d16 ? d16 + C : nullptr, o, T, pl.C3);
  });
}

void Attention::forward_blocks(float* out, float* lse, QkvRows qkv, int B, int T, int C, int NH,
                               uint16_t* out16) {
  if (uses_own_bf16_kernels(T, C, NH)) {
    const int hs = C / NH;
    return for_heads(attn_bf16_head_bytes(T, hs), B, NH, [&](unsigned char* buf, int b, int h) {
      const int64_t at = (int64_t)b * T * C + h * hs;
      attn_bf16_forward_head(buf, qkv + ((int64_t)b * T * 3 * C + h * hs), T, C, hs,
                             out ? out + at : nullptr, out16 ? out16 + at : nullptr,
                             lse + ((int64_t)b * NH + h) * T);
    });
  }
  const BlockPlan pl(T, C, NH, type_);
  each_head(pl, qkv, B, NH, [&](unsigned char* buf, int b, int h) {
    float* S = reinterpret_cast<float*>(buf + pl.s);
    float* o = reinterpret_cast<float*>(buf + pl.o);
    for (int64_t i = 0; i < pl.nblocks; ++i) {
      const int64_t r0 = pl.r0(i), m = pl.rows(i), n = pl.keys(i);
      pl.blk[i].S->run(S, buf + pl.q + r0 * pl.hs * pl.es, buf + pl.k, buf + pl.scratch);
      for (int64_t j = 0; j < m; ++j)  // row j is query r0 + j: keys 0..r0+j count
        lse[((int64_t)b * NH + h) * T + r0 + j] =
            softmax_row(S + j * n, r0 + j + 1, n, pl.low ? buf + pl.pl + j * n * pl.es : nullptr,
                        false, pl.type);
      pl.blk[i].O->run(o, pl.low ? buf + pl.pl : (void*)S, buf + pl.v, buf + pl.scratch);
      const int64_t at = ((int64_t)b * T + r0) * C + h * pl.hs;
      pl.unpack(out ? out + at : nullptr, out16 ? out16 + at : nullptr, o, m, C);
    }
  });
}

void Attention::backward_blocks(float* dqkv, const float* dout, QkvRows qkv, const float* lse,
                                int B, int T, int C, int NH, uint16_t* dqkv16) {
  if (uses_own_bf16_kernels(T, C, NH)) {
    const int hs = C / NH;
    return for_heads(attn_bf16_head_bytes(T, hs), B, NH, [&](unsigned char* buf, int b, int h) {
      const int64_t at = (int64_t)b * T * 3 * C + h * hs;
      attn_bf16_backward_head(buf, qkv + at, dout + (int64_t)b * T * C + h * hs,
                              lse + ((int64_t)b * NH + h) * T, T, C, hs, dqkv ? dqkv + at : nullptr,
                              dqkv16 ? dqkv16 + at : nullptr);
    });
  }
  const BlockPlan pl(T, C, NH, type_);
  each_head(pl, qkv, B, NH, [&](unsigned char* buf, int b, int h) {
    float* S = reinterpret_cast<float*>(buf + pl.s);
    float* dP = reinterpret_cast<float*>(buf + pl.dp);
    float* o = reinterpret_cast<float*>(buf + pl.o);
    float* dK = reinterpret_cast<float*>(buf + pl.dk);
    float* dV = reinterpret_cast<float*>(buf + pl.dv);
    pl.pack(buf + pl.d, dout + (int64_t)b * T * C + h * pl.hs, C);
    std::fill(dK, dK + T * pl.hs, 0.0f);
    std::fill(dV, dV + T * pl.hs, 0.0f);
    const int64_t base = (int64_t)b * T * pl.C3 + h * pl.hs;
    const float* lse_bh = lse + ((int64_t)b * NH + h) * T;
    for (int64_t i = 0; i < pl.nblocks; ++i) {
      const int64_t r0 = pl.r0(i), m = pl.rows(i), n = pl.keys(i);
      const auto& pr = pl.blk[i];
      const size_t qoff = r0 * pl.hs * pl.es;
      pr.S->run(S, buf + pl.q + qoff, buf + pl.k, buf + pl.scratch);  // scores again
      pr.dP->run(dP, buf + pl.d + qoff, buf + pl.v, buf + pl.scratch);
      for (int64_t j = 0; j < m; ++j)
        softmax_backward_row(S + j * n, dP + j * n, r0 + j + 1, n, lse_bh + r0 + j, pl.scale(),
                             pl.low ? buf + pl.pl + j * n * pl.es : nullptr,
                             pl.low ? buf + pl.dsl + j * n * pl.es : nullptr, pl.type);
      const void* Pm = pl.low ? buf + pl.pl : (const void*)S;
      const void* dS = pl.low ? buf + pl.dsl : (const void*)dP;
      pr.dV->run(dV, Pm, buf + pl.d + qoff, buf + pl.scratch);  // keys 0..n-1 += P^T dO
      pr.dV->run(dK, dS, buf + pl.q + qoff, buf + pl.scratch);  // keys 0..n-1 += dS^T q
      pr.O->run(o, dS, buf + pl.k, buf + pl.scratch);           // dQ rows r0..r1-1
      const int64_t at = base + r0 * pl.C3;
      pl.unpack(dqkv ? dqkv + at : nullptr, dqkv16 ? dqkv16 + at : nullptr, o, m, pl.C3);
    }
    for (int64_t t = 0; t < T; ++t) {  // dK and dV of a row together
      const int64_t at = base + t * pl.C3;
      if (dqkv) {
        copy_row_stream(dqkv + at + C, dK + t * pl.hs, pl.hs);
        copy_row_stream(dqkv + at + 2 * C, dV + t * pl.hs, pl.hs);
      }
      if (dqkv16) {
        store_bf16(dqkv16 + at + C, dK + t * pl.hs, pl.hs);
        store_bf16(dqkv16 + at + 2 * C, dV + t * pl.hs, pl.hs);
      }
    }
  });
}

}  // namespace gt::cpu
