#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/fast_math.h"
#include "backend/cpu/onednn_matmul.h"

namespace gt::cpu {
namespace {

struct Views {
  int64_t T, C, C3, hs, TT, NH;
  Views(int T_, int C_, int NH_)
      : T(T_), C(C_), C3(3 * (int64_t)C_), hs(C_ / NH_), TT((int64_t)T_ * T_), NH(NH_) {}
  // (nb, NH, T, hs) in a (B,T,3C) tensor, and its transpose (nb, NH, hs, T)
  Strided part() const { return {T * C3, hs, C3, 1}; }
  Strided part_t() const { return {T * C3, hs, 1, C3}; }
  // (nb, NH, T, hs) in a (B,T,C) tensor
  Strided rows() const { return {T * C, hs, C, 1}; }
  // (nb, NH, T, T) and its transpose
  Strided sq() const { return {NH * TT, TT, T, 1}; }
  Strided sq_t() const { return {NH * TT, TT, 1, T}; }
};

}  // namespace

void attention_forward_chunk(float* out, float* P, float* lse, const float* qkv, int b0, int nb,
                             int T, int C, int NH) {
  const Views v(T, C, NH);
  const float scale = 1.0f / std::sqrt(static_cast<float>(v.hs));
  const float* q = qkv + b0 * T * v.C3;
  onednn_batched_matmul(P, v.sq(), q, v.part(), q + C, v.part_t(), nb, NH, T, T, v.hs, scale);
  const int64_t rows = (int64_t)nb * NH * T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r % T);
    float* a = P + r * T;
    float maxv = -INFINITY;
    for (int t2 = 0; t2 <= t; ++t2) maxv = std::max(maxv, a[t2]);
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int t2 = 0; t2 <= t; ++t2) {
      const float e = exp_approx(a[t2] - maxv);
      a[t2] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
    std::fill(a + t + 1, a + T, 0.0f);
    if (lse) lse[r] = maxv + std::log(sum);
  }
  onednn_batched_matmul(out + b0 * T * C, v.rows(), P, v.sq(), q + 2 * C, v.part(), nb, NH, T, v.hs,
                        T, 1.0f);
}

void attention_probs_from_lse(float* P, const float* qkv, const float* lse, int b0, int nb, int T,
                              int C, int NH) {
  const Views v(T, C, NH);
  const float scale = 1.0f / std::sqrt(static_cast<float>(v.hs));
  const float* q = qkv + b0 * T * v.C3;
  onednn_batched_matmul(P, v.sq(), q, v.part(), q + C, v.part_t(), nb, NH, T, T, v.hs, scale);
  const int64_t rows = (int64_t)nb * NH * T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r % T);
    float* a = P + r * T;
    const float l = lse[r];
#pragma omp simd
    for (int t2 = 0; t2 <= t; ++t2) a[t2] = exp_approx(a[t2] - l);
    std::fill(a + t + 1, a + T, 0.0f);
  }
}

void attention_backward_chunk(float* dqkv, float* dP, const float* dout, const float* qkv,
                              const float* P, int b0, int nb, int T, int C, int NH) {
  const Views v(T, C, NH);
  const float scale = 1.0f / std::sqrt(static_cast<float>(v.hs));
  const float* q = qkv + b0 * T * v.C3;
  const float* d = dout + b0 * T * C;
  float* dq = dqkv + b0 * T * v.C3;
  // dP = dO V^T; dV = P^T dO
  onednn_batched_matmul(dP, v.sq(), d, v.rows(), q + 2 * C, v.part_t(), nb, NH, T, T, v.hs, 1.0f);
  onednn_batched_matmul(dq + 2 * C, v.part(), P, v.sq_t(), d, v.rows(), nb, NH, T, v.hs, T, 1.0f);
  // dS = P (dP - sum_t2 P dP) scale, in place in dP (the scale of S folded in)
  const int64_t rows = (int64_t)nb * NH * T;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r % T);
    const float* a = P + r * T;
    float* g = dP + r * T;
    float dot = 0.f;
#pragma omp simd reduction(+ : dot)
    for (int t2 = 0; t2 <= t; ++t2) dot += a[t2] * g[t2];
#pragma omp simd
    for (int t2 = 0; t2 <= t; ++t2) g[t2] = a[t2] * (g[t2] - dot) * scale;
    std::fill(g + t + 1, g + T, 0.0f);
  }
  // dQ = dS K; dK = dS^T Q
  onednn_batched_matmul(dq, v.part(), dP, v.sq(), q + C, v.part(), nb, NH, T, v.hs, T, 1.0f);
  onednn_batched_matmul(dq + C, v.part(), dP, v.sq_t(), q, v.part(), nb, NH, T, v.hs, T, 1.0f);
}

}  // namespace gt::cpu
