#include "backend/cpu/attention.h"

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

/// Writes x into element i of an operand buffer of type t.
inline void store(void* dst, int64_t i, float x, AttnType t) {
  switch (t) {
    case AttnType::f32:
      static_cast<float*>(dst)[i] = x;
      break;
    case AttnType::f32_half:
      static_cast<float*>(dst)[i] = static_cast<float>(static_cast<_Float16>(x));
      break;
    case AttnType::bf16:
      static_cast<uint16_t*>(dst)[i] = to_bf16(x);
      break;
    case AttnType::f16:
      static_cast<uint16_t*>(dst)[i] = to_f16(x);
      break;
  }
}

/// n floats into an operand buffer of type t (vectorisable per type).
void store_row(void* dst, const float* x, int64_t n, AttnType t) {
  switch (t) {
    case AttnType::f32:
      std::memcpy(dst, x, n * sizeof(float));
      break;
    case AttnType::bf16: {
      uint16_t* o = static_cast<uint16_t*>(dst);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = to_bf16(x[i]);
      break;
    }
    default:
      for (int64_t i = 0; i < n; ++i) store(dst, i, x[i], t);
  }
}

struct Dims {
  int64_t T, C, C3, hs, NH, TT;
  Dims(int T_, int C_, int NH_)
      : T(T_), C(C_), C3(3 * (int64_t)C_), hs(C_ / NH_), NH(NH_), TT((int64_t)T_ * T_) {}
  Strided heads() const { return {NH * T * hs, T * hs, hs, 1}; }    // (NH,T,hs) dense
  Strided heads_t() const { return {NH * T * hs, T * hs, 1, hs}; }  // its (NH,hs,T) transpose
  Strided sq() const { return {NH * TT, TT, T, 1}; }                // (NH,T,T)
  Strided sq_t() const { return {NH * TT, TT, 1, T}; }
  Strided rows() const { return {T * C, hs, C, 1}; }  // (NH,T,hs) view of (T,C) rows
};

/// Packs `parts` consecutive C-wide slices of each of T rows (row stride ld) head-major:
/// dst[p] (NH,T,hs) = src[t, p*C + h*hs + i].
void pack(void* const* dst, const float* src, int64_t ld, int parts, const Dims& d, AttnType t) {
  const size_t es = elem_bytes(t);
#pragma omp parallel for collapse(2) schedule(static)
  for (int p = 0; p < parts; ++p)
    for (int64_t tt = 0; tt < d.T; ++tt)
      for (int64_t h = 0; h < d.NH; ++h)
        store_row(static_cast<unsigned char*>(dst[p]) + ((h * d.T + tt) * d.hs) * es,
                  src + tt * ld + p * d.C + h * d.hs, d.hs, t);
}

}  // namespace

size_t attention_workspace_bytes(int T, int C, int NH, AttnType type, bool fused) {
  const size_t TC = (size_t)T * C, NTT = (size_t)NH * T * T, es = elem_bytes(type);
  size_t b = 4 * TC * es + 3 * TC * sizeof(float) + NTT * sizeof(float);
  if (fused) b += NTT * sizeof(float);
  if (type != AttnType::f32) b += 2 * NTT * es;
  return b;
}

void* Attention::buffer(std::vector<unsigned char>& b, size_t bytes) {
  if (b.size() != bytes) b = std::vector<unsigned char>(bytes);  // exact (memory plan)
  return b.data();
}

void Attention::forward(float* out, float* att, float* lse, const float* qkv, int B, int T, int C,
                        int NH) {
  const Dims d(T, C, NH);
  const AttnType t = type_;
  const size_t es = elem_bytes(t), TCb = (size_t)T * C * es, NTT = (size_t)NH * T * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  void* qkvh[3] = {buffer(q_, TCb), buffer(k_, TCb), buffer(v_, TCb)};
  float* pfused = att ? nullptr : static_cast<float*>(buffer(p_, NTT * sizeof(float)));
  void* pl = t == AttnType::f32 ? nullptr : buffer(pl_, NTT * es);
  for (int b = 0; b < B; ++b) {
    pack(qkvh, qkv + b * d.T * d.C3, d.C3, 3, d, t);
    float* P = att ? att + b * (int64_t)NTT : pfused;
    onednn_batched_matmul(P, d.sq(), qkvh[0], d.heads(), qkvh[1], d.heads_t(), 1, NH, T, T, d.hs,
                          scale, mm_type(t));
    const int64_t rows = NH * d.T;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int tq = static_cast<int>(r % T);
      float* a = P + r * T;
      float maxv = -INFINITY;
      for (int t2 = 0; t2 <= tq; ++t2) maxv = std::max(maxv, a[t2]);
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int t2 = 0; t2 <= tq; ++t2) {
        const float e = exp_approx(a[t2] - maxv);
        a[t2] = e;
        sum += e;
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int t2 = 0; t2 <= tq; ++t2) a[t2] *= inv;
      std::fill(a + tq + 1, a + T, 0.0f);
      if (pl) store_row(static_cast<unsigned char*>(pl) + r * T * es, a, T, t);
      if (lse) lse[b * rows + r] = maxv + std::log(sum);
    }
    onednn_batched_matmul(out + b * d.T * d.C, d.rows(), pl ? pl : P, d.sq(), qkvh[2], d.heads(), 1,
                          NH, T, d.hs, T, 1.0f, mm_type(t));
  }
}

void Attention::backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                         const float* lse, int B, int T, int C, int NH) {
  const Dims d(T, C, NH);
  const AttnType t = type_;
  const size_t es = elem_bytes(t), TCb = (size_t)T * C * es, NTT = (size_t)NH * T * T;
  const size_t TCf = (size_t)T * C * sizeof(float);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  void* qkvh[3] = {buffer(q_, TCb), buffer(k_, TCb), buffer(v_, TCb)};
  void* doh[1] = {buffer(do_, TCb)};
  float* dh[3] = {static_cast<float*>(buffer(dq_, TCf)), static_cast<float*>(buffer(dk_, TCf)),
                  static_cast<float*>(buffer(dv_, TCf))};
  float* dP = static_cast<float*>(buffer(dp_, NTT * sizeof(float)));
  float* pfused = att ? nullptr : static_cast<float*>(buffer(p_, NTT * sizeof(float)));
  const bool low = t != AttnType::f32;
  void* pl = low ? buffer(pl_, NTT * es) : nullptr;
  void* dsl = low ? buffer(dsl_, NTT * es) : nullptr;
  const MmType mt = mm_type(t);
  for (int b = 0; b < B; ++b) {
    pack(qkvh, qkv + b * d.T * d.C3, d.C3, 3, d, t);
    pack(doh, dout + b * d.T * d.C, d.C, 1, d, t);
    const float* P = att ? att + b * (int64_t)NTT : pfused;
    if (!att)  // scores again; the row pass below turns them into probabilities with lse
      onednn_batched_matmul(pfused, d.sq(), qkvh[0], d.heads(), qkvh[1], d.heads_t(), 1, NH, T, T,
                            d.hs, scale, mt);
    onednn_batched_matmul(dP, d.sq(), doh[0], d.heads(), qkvh[2], d.heads_t(), 1, NH, T, T, d.hs,
                          1.0f, mt);
    const int64_t rows = NH * d.T;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int tq = static_cast<int>(r % T);
      float* g = dP + r * T;
      const float* a = P + r * T;
      if (!att) {
        float* s = pfused + r * T;
        const float l = lse[b * rows + r];
#pragma omp simd
        for (int t2 = 0; t2 <= tq; ++t2) s[t2] = exp_approx(s[t2] - l);
        std::fill(s + tq + 1, s + T, 0.0f);
      }
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int t2 = 0; t2 <= tq; ++t2) dot += a[t2] * g[t2];
#pragma omp simd
      for (int t2 = 0; t2 <= tq; ++t2) g[t2] = a[t2] * (g[t2] - dot) * scale;
      std::fill(g + tq + 1, g + T, 0.0f);
      if (low) {
        store_row(static_cast<unsigned char*>(pl) + r * T * es, a, T, t);
        store_row(static_cast<unsigned char*>(dsl) + r * T * es, g, T, t);
      }
    }
    const void* Pm = low ? pl : P;
    const void* dS = low ? dsl : dP;
    // dV = P^T dO; dQ = dS K; dK = dS^T Q, each (NH,T,hs) dense in f32
    onednn_batched_matmul(dh[2], d.heads(), Pm, d.sq_t(), doh[0], d.heads(), 1, NH, T, d.hs, T,
                          1.0f, mt);
    onednn_batched_matmul(dh[0], d.heads(), dS, d.sq(), qkvh[1], d.heads(), 1, NH, T, d.hs, T, 1.0f,
                          mt);
    onednn_batched_matmul(dh[1], d.heads(), dS, d.sq_t(), qkvh[0], d.heads(), 1, NH, T, d.hs, T,
                          1.0f, mt);
    float* dst = dqkv + b * d.T * d.C3;
#pragma omp parallel for collapse(2) schedule(static)
    for (int p = 0; p < 3; ++p)
      for (int64_t tt = 0; tt < d.T; ++tt)
        for (int64_t h = 0; h < d.NH; ++h)
          std::memcpy(dst + tt * d.C3 + p * d.C + h * d.hs, dh[p] + (h * d.T + tt) * d.hs,
                      d.hs * sizeof(float));
  }
}

}  // namespace gt::cpu
