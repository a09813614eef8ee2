// backend/cpu/onednn_matmul.h: C(M,N) [+]= op(A)(M,K) @ op(B)(K,N) [+ bias(N)] with oneDNN,
// f32 in and out. Primitives are created once per shape and reused (oneDNN's
// "describe, create, execute" pattern); creation is the slow part.
#pragma once
#include <cstdint>

namespace gt::cpu {

/// Row-major operands. trans_a: A is stored (K,M); trans_b: B is stored (N,K).
/// accumulate: C += result (oneDNN sum post-op) instead of C = result. bias may be null.
void onednn_matmul(float* c, const float* a, const float* b, const float* bias, int64_t M,
                   int64_t N, int64_t K, bool trans_a, bool trans_b, bool accumulate);

}  // namespace gt::cpu
