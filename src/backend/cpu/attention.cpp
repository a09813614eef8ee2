#include "backend/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/fast_math.h"
#include "backend/cpu/onednn_matmul.h"

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
    case AttnType::bf16: {
      uint16_t* o = static_cast<uint16_t*>(dst);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = to_bf16(x[i]);
      break;
    }
    case AttnType::f16: {
      uint16_t* o = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) o[i] = to_f16(x[i]);
      break;
    }
  }
}

/// Row of P: dst[0..n) = a * inv in the operand type, zeros up to T; also a *= inv in place
/// when keep_f32 (the stored att), else a is left unnormalised.
void normalize_store(void* dst, float* a, int n, int T, float inv, bool keep_f32, AttnType t) {
  if (t == AttnType::bf16) {
    uint16_t* o = static_cast<uint16_t*>(dst);
#pragma omp simd
    for (int i = 0; i < n; ++i) {
      const float x = a[i] * inv;
      o[i] = to_bf16(x);
      if (keep_f32) a[i] = x;
    }
    std::fill(o + n, o + T, uint16_t(0));
  } else {
    for (int i = 0; i < n; ++i) a[i] *= inv;
    store_row(dst, a, n, t);
    for (int i = n; i < T; ++i) a[i] = 0.0f;
    store_row(static_cast<unsigned char*>(dst) + n * elem_bytes(t), a + n, T - n, t);
    if (!keep_f32)
      for (int i = 0; i < n; ++i) a[i] /= inv;
  }
  if (keep_f32) std::fill(a + n, a + T, 0.0f);
}

/// Row of dS in the operand type: dst[i] = a[i] (g[i] - dot) scale for i < n, zeros up to T.
void ds_store(void* dst, const float* a, const float* g, int n, int T, float dot, float scale,
              AttnType t) {
  if (t == AttnType::bf16) {
    uint16_t* o = static_cast<uint16_t*>(dst);
#pragma omp simd
    for (int i = 0; i < n; ++i) o[i] = to_bf16(a[i] * (g[i] - dot) * scale);
    std::fill(o + n, o + T, uint16_t(0));
  } else {
    const size_t es = elem_bytes(t);
    for (int i = 0; i < n; ++i) {
      const float x = a[i] * (g[i] - dot) * scale;
      store_row(static_cast<unsigned char*>(dst) + i * es, &x, 1, t);
    }
    const float zero = 0.0f;
    for (int i = n; i < T; ++i) store_row(static_cast<unsigned char*>(dst) + i * es, &zero, 1, t);
  }
}

/// The products of one head, and the per-thread buffer layout.
struct Plan {
  int64_t T, C, C3, hs, NH;
  AttnType type;
  size_t es;
  bool fused, low;
  const ThreadMatmul *S, *O, *dP, *dV, *dQ, *dK;
  // byte offsets in a thread's buffer
  size_t q, k, v, d, o, p, dp, pl, dsl, scratch, total;

  Plan(int T_, int C_, int NH_, AttnType t, bool fused_)
      : T(T_),
        C(C_),
        C3(3 * (int64_t)C_),
        hs(C_ / NH_),
        NH(NH_),
        type(t),
        es(elem_bytes(t)),
        fused(fused_),
        low(t != AttnType::f32) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const MmType mt = mm_type(t);
    // S(T,T) = scale q(T,hs) k^T; O(T,hs) = P(T,T) v(T,hs). Outputs are dense and copied
    // into the strided rows after: oneDNN 2.6 has no brgemm for a strided destination.
    S = &thread_matmul(T, T, hs, hs, false, hs, true, T, scale, mt);
    O = &thread_matmul(T, hs, T, T, false, hs, false, hs, 1.0f, mt);
    // dP = dO v^T; dV = P^T dO, dQ = dS k, dK = dS^T q
    dP = &thread_matmul(T, T, hs, hs, false, hs, true, T, 1.0f, mt);
    dV = &thread_matmul(T, hs, T, T, true, hs, false, hs, 1.0f, mt);
    dQ = O;
    dK = dV;
    size_t at = 0;
    auto take = [&](size_t bytes) {
      size_t off = at;
      at += (bytes + 63) / 64 * 64;
      return off;
    };
    const size_t head = T * hs * es, sq = T * T * sizeof(float);
    q = take(head);
    k = take(head);
    v = take(head);
    d = take(head);
    o = take(T * hs * sizeof(float));
    p = fused ? take(sq) : 0;
    dp = take(sq);
    pl = low ? take(T * T * es) : 0;
    dsl = low ? take(T * T * es) : 0;
    size_t sp = 0;
    for (auto* m : {S, O, dP, dV, dQ}) sp = std::max(sp, m->scratchpad_bytes());
    scratch = take(sp);
    total = at;
  }

  /// Copies the dense (T,hs) f32 result at o into T rows of stride ld at dst.
  /// (and its bf16 copy into dst16 at the same offsets, if not null).
  void unpack(float* dst, uint16_t* dst16, const unsigned char* o, int64_t ld) const {
    const float* src = reinterpret_cast<const float*>(o);
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(dst + t * ld, src + t * hs, hs * sizeof(float));
      if (dst16) store_bf16(dst16 + t * ld, src + t * hs, hs);
    }
  }

  /// Packs head h of the T rows at src (row stride ld) into dst (T,hs) dense.
  void pack(unsigned char* dst, const float* src, int64_t ld) const {
    if (type == AttnType::bf16) {  // the hot case, inlined
      uint16_t* o = reinterpret_cast<uint16_t*>(dst);
      for (int64_t t = 0; t < T; ++t) store_bf16(o + t * hs, src + t * ld, hs);
      return;
    }
    for (int64_t t = 0; t < T; ++t) store_row(dst + t * hs * es, src + t * ld, hs, type);
  }
};

/// The fused form: causal query blocks of kBlock rows. Block i (rows r0..r1-1) needs keys
/// 0..r1-1 only, so the products skip the masked upper triangle (for T = 256: 62.5 % of the
/// square's FLOPs) and the scores of a block, (kBlock, r1), are all a thread keeps.
constexpr int64_t kBlock = 64;

struct BlockPlan {
  struct Products {
    const ThreadMatmul *S, *O, *dP, *dV, *dQ;  // dK has dV's shape
  };
  int64_t T, C, C3, hs, NH, nblocks;
  AttnType type;
  size_t es;
  bool low;
  std::vector<Products> blk;
  size_t q, k, v, d, o, dk, dv, s, dp, pl, dsl, scratch, total;

  BlockPlan(int T_, int C_, int NH_, AttnType t)
      : T(T_),
        C(C_),
        C3(3 * (int64_t)C_),
        hs(C_ / NH_),
        NH(NH_),
        nblocks((T_ + kBlock - 1) / kBlock),
        type(t),
        es(elem_bytes(t)),
        low(t != AttnType::f32) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const MmType mt = mm_type(t);
    size_t sp = 0;
    for (int64_t i = 0; i < nblocks; ++i) {
      const int64_t m = rows(i), n = keys(i);
      Products p;
      p.S = &thread_matmul(m, n, hs, hs, false, hs, true, n, scale, mt);        // q_i k^T
      p.O = &thread_matmul(m, hs, n, n, false, hs, false, hs, 1.0f, mt);        // P_i v
      p.dP = &thread_matmul(m, n, hs, hs, false, hs, true, n, 1.0f, mt);        // dO_i v^T
      p.dV = &thread_matmul(n, hs, m, n, true, hs, false, hs, 1.0f, mt, true);  // += P_i^T dO_i
      p.dQ = p.O;                                                               // dS_i k
      for (auto* x : {p.S, p.O, p.dP, p.dV}) sp = std::max(sp, x->scratchpad_bytes());
      blk.push_back(p);
    }
    size_t at = 0;
    auto take = [&](size_t bytes) {
      size_t off = at;
      at += (bytes + 63) / 64 * 64;
      return off;
    };
    const size_t head = T * hs * es, headf = T * hs * sizeof(float);
    const size_t tile = std::min(kBlock, T) * T;
    q = take(head);
    k = take(head);
    v = take(head);
    d = take(head);
    o = take(headf);
    dk = take(headf);
    dv = take(headf);
    s = take(tile * sizeof(float));
    dp = take(tile * sizeof(float));
    pl = low ? take(tile * es) : 0;
    dsl = low ? take(tile * es) : 0;
    scratch = take(sp);
    total = at;
  }
  int64_t r0(int64_t i) const { return i * kBlock; }
  int64_t rows(int64_t i) const { return std::min(T, r0(i) + kBlock) - r0(i); }
  int64_t keys(int64_t i) const { return r0(i) + rows(i); }

  void pack(unsigned char* dst, const float* src, int64_t ld) const {
    if (type == AttnType::bf16) {
      uint16_t* o16 = reinterpret_cast<uint16_t*>(dst);
      for (int64_t t = 0; t < T; ++t) store_bf16(o16 + t * hs, src + t * ld, hs);
      return;
    }
    for (int64_t t = 0; t < T; ++t) store_row(dst + t * hs * es, src + t * ld, hs, type);
  }
  /// q, k, v of one head from T rows of 3C (each row's three slices together, the next rows
  /// prefetched: the rows are 12 KiB apart, too far for the hardware prefetcher).
  void pack_qkv(unsigned char* q, unsigned char* k, unsigned char* v, const float* rows) const {
    for (int64_t t = 0; t < T; ++t) {
      const float* r = rows + t * C3;
      if (t + 2 < T)
        for (int p = 0; p < 3; ++p)
          for (int64_t x = 0; x < hs; x += 16) __builtin_prefetch(r + 2 * C3 + p * C + x);
      if (type == AttnType::bf16) {
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
  /// m dense rows of hs floats at src into rows of stride ld at dst (and dst16, if not null).
  void unpack(float* dst, uint16_t* dst16, const float* src, int64_t m, int64_t ld) const {
    for (int64_t t = 0; t < m; ++t) {
      std::memcpy(dst + t * ld, src + t * hs, hs * sizeof(float));
      if (dst16) store_bf16(dst16 + t * ld, src + t * hs, hs);
    }
  }
  /// A row of n scores or gradients into the operand type (a no-op copy source for f32).
  const void* operand(unsigned char* buf16, float* row, int64_t n) const {
    if (!low) return row;
    store_row(buf16, row, n, type);
    return buf16;
  }
};

}  // namespace

size_t attention_workspace_bytes(int T, int C, int NH, AttnType type, bool fused, int threads) {
  return (fused ? BlockPlan(T, C, NH, type).total : Plan(T, C, NH, type, false).total) * threads;
}

void Attention::forward_blocks(float* out, float* lse, const float* qkv, int B, int T, int C,
                               int NH, uint16_t* out16) {
  const BlockPlan pl(T, C, NH, type_);
  const int nt = omp_get_max_threads();
  if ((int)per_thread_.size() != nt) per_thread_.assign(nt, {});
#pragma omp parallel
  {
    unsigned char* buf = thread_buffer(omp_get_thread_num(), pl.total);
    float* S = reinterpret_cast<float*>(buf + pl.s);
    float* o = reinterpret_cast<float*>(buf + pl.o);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h) {
        pl.pack_qkv(buf + pl.q, buf + pl.k, buf + pl.v, qkv + (int64_t)b * T * pl.C3 + h * pl.hs);
        for (int64_t i = 0; i < pl.nblocks; ++i) {
          const int64_t r0 = pl.r0(i), m = pl.rows(i), n = pl.keys(i);
          pl.blk[i].S->run(S, buf + pl.q + r0 * pl.hs * pl.es, buf + pl.k, buf + pl.scratch);
          for (int64_t j = 0; j < m; ++j) {
            const int64_t t = r0 + j;  // keys 0..t of row j are unmasked
            float* a = S + j * n;
            const float maxv = row_max(a, t + 1);
            float sum = 0.f;
#pragma omp simd reduction(+ : sum)
            for (int64_t t2 = 0; t2 <= t; ++t2) {
              const float e = exp_approx(a[t2] - maxv);
              a[t2] = e;
              sum += e;
            }
            const float inv = 1.0f / sum;
            if (pl.low) {
              normalize_store(buf + pl.pl + j * n * pl.es, a, t + 1, n, inv, false, pl.type);
            } else {
#pragma omp simd
              for (int64_t t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
              std::fill(a + t + 1, a + n, 0.0f);
            }
            lse[((int64_t)b * NH + h) * T + t] = maxv + std::log(sum);
          }
          pl.blk[i].O->run(o, pl.low ? buf + pl.pl : (void*)S, buf + pl.v, buf + pl.scratch);
          const int64_t at = ((int64_t)b * T + r0) * C + h * pl.hs;
          pl.unpack(out + at, out16 ? out16 + at : nullptr, o, m, C);
        }
      }
  }
}

void Attention::backward_blocks(float* dqkv, const float* dout, const float* qkv, const float* lse,
                                int B, int T, int C, int NH, uint16_t* dqkv16) {
  const BlockPlan pl(T, C, NH, type_);
  const float scale = 1.0f / std::sqrt(static_cast<float>(pl.hs));
  const int nt = omp_get_max_threads();
  if ((int)per_thread_.size() != nt) per_thread_.assign(nt, {});
#pragma omp parallel
  {
    unsigned char* buf = thread_buffer(omp_get_thread_num(), pl.total);
    float* S = reinterpret_cast<float*>(buf + pl.s);
    float* dP = reinterpret_cast<float*>(buf + pl.dp);
    float* o = reinterpret_cast<float*>(buf + pl.o);
    float* dK = reinterpret_cast<float*>(buf + pl.dk);
    float* dV = reinterpret_cast<float*>(buf + pl.dv);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h) {
        pl.pack_qkv(buf + pl.q, buf + pl.k, buf + pl.v, qkv + (int64_t)b * T * pl.C3 + h * pl.hs);
        pl.pack(buf + pl.d, dout + (int64_t)b * T * C + h * pl.hs, C);
        std::fill(dK, dK + T * pl.hs, 0.0f);
        std::fill(dV, dV + T * pl.hs, 0.0f);
        const int64_t base = (int64_t)b * T * pl.C3 + h * pl.hs;
        for (int64_t i = 0; i < pl.nblocks; ++i) {
          const int64_t r0 = pl.r0(i), m = pl.rows(i), n = pl.keys(i);
          const auto& pr = pl.blk[i];
          const size_t qoff = r0 * pl.hs * pl.es;
          pr.S->run(S, buf + pl.q + qoff, buf + pl.k, buf + pl.scratch);
          pr.dP->run(dP, buf + pl.d + qoff, buf + pl.v, buf + pl.scratch);
          for (int64_t j = 0; j < m; ++j) {
            const int64_t t = r0 + j;
            float* a = S + j * n;
            float* g = dP + j * n;
            const float l = lse[((int64_t)b * NH + h) * T + t];
            float dot = 0.f;
#pragma omp simd reduction(+ : dot)
            for (int64_t t2 = 0; t2 <= t; ++t2) {
              a[t2] = exp_approx(a[t2] - l);
              dot += a[t2] * g[t2];
            }
            std::fill(a + t + 1, a + n, 0.0f);
            if (pl.low) {
              store_row(buf + pl.pl + j * n * pl.es, a, n, pl.type);
              ds_store(buf + pl.dsl + j * n * pl.es, a, g, t + 1, n, dot, scale, pl.type);
            } else {
#pragma omp simd
              for (int64_t t2 = 0; t2 <= t; ++t2) g[t2] = a[t2] * (g[t2] - dot) * scale;
              std::fill(g + t + 1, g + n, 0.0f);
            }
          }
          const void* Pm = pl.low ? buf + pl.pl : (const void*)S;
          const void* dS = pl.low ? buf + pl.dsl : (const void*)dP;
          pr.dV->run(dV, Pm, buf + pl.d + qoff, buf + pl.scratch);  // keys 0..n-1 += P^T dO
          pr.dV->run(dK, dS, buf + pl.q + qoff, buf + pl.scratch);  // keys 0..n-1 += dS^T q
          pr.dQ->run(o, dS, buf + pl.k, buf + pl.scratch);          // rows r0..r1-1
          const int64_t at = base + r0 * pl.C3;
          pl.unpack(dqkv + at, dqkv16 ? dqkv16 + at : nullptr, o, m, pl.C3);
        }
        for (int64_t t = 0; t < T; ++t) {  // dK and dV of a row together
          const int64_t at = base + t * pl.C3;
          std::memcpy(dqkv + at + C, dK + t * pl.hs, pl.hs * sizeof(float));
          std::memcpy(dqkv + at + 2 * C, dV + t * pl.hs, pl.hs * sizeof(float));
          if (dqkv16) {
            store_bf16(dqkv16 + at + C, dK + t * pl.hs, pl.hs);
            store_bf16(dqkv16 + at + 2 * C, dV + t * pl.hs, pl.hs);
          }
        }
      }
  }
}

unsigned char* Attention::thread_buffer(int thread, size_t bytes) {
  auto& b = per_thread_[thread];
  if (b.size() != bytes) b = std::vector<unsigned char>(bytes);
  return b.data();
}

void Attention::forward(float* out, float* att, float* lse, const float* qkv, int B, int T, int C,
                        int NH, uint16_t* out16) {
  if (!att) return forward_blocks(out, lse, qkv, B, T, C, NH, out16);
  const Plan pl(T, C, NH, type_, att == nullptr);
  const int nt = omp_get_max_threads();
  if ((int)per_thread_.size() != nt) per_thread_.assign(nt, {});
#pragma omp parallel
  {
    unsigned char* buf = thread_buffer(omp_get_thread_num(), pl.total);
    float* Sbuf = reinterpret_cast<float*>(buf + pl.p);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h) {
        const float* rows = qkv + (int64_t)b * T * pl.C3 + h * pl.hs;
        pl.pack(buf + pl.q, rows, pl.C3);
        pl.pack(buf + pl.k, rows + C, pl.C3);
        pl.pack(buf + pl.v, rows + 2 * C, pl.C3);
        float* P = att ? att + ((int64_t)b * NH + h) * T * T : Sbuf;
        pl.S->run(P, buf + pl.q, buf + pl.k, buf + pl.scratch);
        for (int t = 0; t < T; ++t) {
          float* a = P + (int64_t)t * T;
          float maxv = row_max(a, t + 1);
          float sum = 0.f;
#pragma omp simd reduction(+ : sum)
          for (int t2 = 0; t2 <= t; ++t2) {
            const float e = exp_approx(a[t2] - maxv);
            a[t2] = e;
            sum += e;
          }
          const float inv = 1.0f / sum;
          if (pl.low) {  // the product reads the 16-bit copy; the f32 row is kept only in att
            normalize_store(buf + pl.pl + t * T * pl.es, a, t + 1, T, inv, att != nullptr, pl.type);
          } else {
#pragma omp simd
            for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
            std::fill(a + t + 1, a + T, 0.0f);
          }
          if (lse) lse[((int64_t)b * NH + h) * T + t] = maxv + std::log(sum);
        }
        float* o = reinterpret_cast<float*>(buf + pl.o);
        pl.O->run(o, pl.low ? buf + pl.pl : (void*)P, buf + pl.v, buf + pl.scratch);
        const int64_t at = (int64_t)b * T * C + h * pl.hs;
        pl.unpack(out + at, out16 ? out16 + at : nullptr, buf + pl.o, C);
      }
  }
}

void Attention::backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                         const float* lse, int B, int T, int C, int NH, uint16_t* dqkv16) {
  if (!att) return backward_blocks(dqkv, dout, qkv, lse, B, T, C, NH, dqkv16);
  const Plan pl(T, C, NH, type_, att == nullptr);
  const float scale = 1.0f / std::sqrt(static_cast<float>(pl.hs));
  const int nt = omp_get_max_threads();
  if ((int)per_thread_.size() != nt) per_thread_.assign(nt, {});
#pragma omp parallel
  {
    unsigned char* buf = thread_buffer(omp_get_thread_num(), pl.total);
    float* Sbuf = reinterpret_cast<float*>(buf + pl.p);
    float* dP = reinterpret_cast<float*>(buf + pl.dp);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h) {
        const float* rows = qkv + (int64_t)b * T * pl.C3 + h * pl.hs;
        pl.pack(buf + pl.q, rows, pl.C3);
        pl.pack(buf + pl.k, rows + C, pl.C3);
        pl.pack(buf + pl.v, rows + 2 * C, pl.C3);
        pl.pack(buf + pl.d, dout + (int64_t)b * T * C + h * pl.hs, C);
        const float* P = att ? att + ((int64_t)b * NH + h) * T * T : Sbuf;
        if (!att)  // the scores again; the row pass turns them into probabilities with lse
          pl.S->run(Sbuf, buf + pl.q, buf + pl.k, buf + pl.scratch);
        pl.dP->run(dP, buf + pl.d, buf + pl.v, buf + pl.scratch);
        for (int t = 0; t < T; ++t) {
          float* g = dP + (int64_t)t * T;
          const float* a = P + (int64_t)t * T;
          if (!att) {
            float* s = Sbuf + (int64_t)t * T;
            const float l = lse[((int64_t)b * NH + h) * T + t];
#pragma omp simd
            for (int t2 = 0; t2 <= t; ++t2) s[t2] = exp_approx(s[t2] - l);
            std::fill(s + t + 1, s + T, 0.0f);
          }
          float dot = 0.f;
#pragma omp simd reduction(+ : dot)
          for (int t2 = 0; t2 <= t; ++t2) dot += a[t2] * g[t2];
          if (pl.low) {
            store_row(buf + pl.pl + t * T * pl.es, a, T, pl.type);
            ds_store(buf + pl.dsl + t * T * pl.es, a, g, t + 1, T, dot, scale, pl.type);
          } else {
#pragma omp simd
            for (int t2 = 0; t2 <= t; ++t2) g[t2] = a[t2] * (g[t2] - dot) * scale;
            std::fill(g + t + 1, g + T, 0.0f);
          }
        }
        const void* Pm = pl.low ? buf + pl.pl : (const void*)P;
        const void* dS = pl.low ? buf + pl.dsl : (const void*)dP;
        const int64_t at = (int64_t)b * T * pl.C3 + h * pl.hs;
        float* dst = dqkv + at;
        uint16_t* d16 = dqkv16 ? dqkv16 + at : nullptr;
        float* o = reinterpret_cast<float*>(buf + pl.o);
        pl.dV->run(o, Pm, buf + pl.d, buf + pl.scratch);
        pl.unpack(dst + 2 * C, d16 ? d16 + 2 * C : nullptr, buf + pl.o, pl.C3);
        pl.dQ->run(o, dS, buf + pl.k, buf + pl.scratch);
        pl.unpack(dst, d16, buf + pl.o, pl.C3);
        pl.dK->run(o, dS, buf + pl.q, buf + pl.scratch);
        pl.unpack(dst + C, d16 ? d16 + C : nullptr, buf + pl.o, pl.C3);
      }
  }
}

}  // namespace gt::cpu
