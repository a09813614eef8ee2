// backend/cpu/classifier.cpp: see classifier.h.
#include "backend/cpu/classifier.h"

#include <cmath>
#include <vector>

#include "backend/cpu/fast_math.h"

namespace gt::cpu {
namespace {

// One row in f32: its loss, then the row overwritten by its gradient.
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
