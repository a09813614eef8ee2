// backend/cpu/classifier.cpp: see classifier.h.
#include "backend/cpu/classifier.h"

#include <cmath>
#include <vector>

#include "backend/cpu/fast_math.h"

namespace gt::cpu {
namespace {

// One row in f32: its loss, then the row overwritten by its gradient.
#if GT_SIMD512
// The row's exps are computed once and kept in the row, then scaled by dloss / sum (a row's
// last partial vector masked): at a 65-token vocabulary the two exp passes of the loops below
// and their scalar tails took 12x the time of moving the row's bytes (bench/own_kernels.cpp).
// The attention's softmax rows share the first two passes (exp_minus_max_row512). A NaN logit
// gives a NaN loss and gradient, as there (its exp, and with it the sum, is NaN).
float row_loss_and_gradient(float* l, int32_t target, float dloss, int V) {
  const float lt = l[target];
  float maxv;
  const float s = exp_minus_max_row512(l, V, maxv);
  const __m512 inv = _mm512_set1_ps(dloss / s);
  for (int j = 0; j < V; j += 16) {
    const __mmask16 m = lanes_below(j, V);
    _mm512_mask_storeu_ps(l + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, l + j), inv));
  }
  l[target] -= dloss;
  return std::log(s) + maxv - lt;
}
#else
float row_loss_and_gradient(float* l, int32_t target, float dloss, int V) {
  const float maxv = row_max(l, V);
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < V; ++j) sum += exp_approx(l[j] - maxv);
  const float lse = std::log(sum) + maxv;
  const float loss = lse - l[target];
  const float inv = dloss / sum;
#pragma omp simd
  for (int j = 0; j < V; ++j) l[j] = exp_approx(l[j] - maxv) * inv;
  l[target] -= dloss;
  return loss;
}
#endif

}  // namespace

void softmax_crossentropy_fused_rows(float* l32, uint16_t* l16, float* losses,
                                     const int32_t* targets, float dloss, int64_t N, int V) {
  if (!l16) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i)
      losses[i] = row_loss_and_gradient(l32 + i * V, targets[i], dloss, V);
    return;
  }
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(V));  // one per thread, in its cache
#pragma omp for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      uint16_t* r16 = l16 + i * V;
      float* r = row.data();
#pragma omp simd
      for (int j = 0; j < V; ++j) r[j] = bf16_to_float(r16[j]);
      losses[i] = row_loss_and_gradient(r, targets[i], dloss, V);
      store_bf16(r16, r, V);
    }
  }
}

}  // namespace gt::cpu
