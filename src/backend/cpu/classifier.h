// backend/cpu/classifier.h: the fused softmax cross-entropy of the CPU backend
// (Backend::softmax_crossentropy_fused): one pass per row that never stores probabilities.
#pragma once
#include <cstdint>

namespace gt::cpu {

/// For each row i < N of the logits (N, V): losses[i] = logsumexp(row) - row[targets[i]], and
/// the row overwritten in place with (softmax(row) - onehot(targets[i])) * dloss. The logits
/// are l32 (f32), or l16 (bf16: each row widened exactly into a per-thread f32 row, the
/// gradient rounded to nearest-even on the way back; half the memory traffic). Exactly one of
/// l32, l16 is non-null. exp is fast_math.h's exp_approx (relative error below 2e-7). Rows
/// in parallel (OpenMP); targets must already be checked to lie in [0, V).
void softmax_crossentropy_fused_rows(float* l32, uint16_t* l16, float* losses,
                                     const int32_t* targets, float dloss, int64_t N, int V);

}  // namespace gt::cpu
