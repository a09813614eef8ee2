// backend/cpu/onednn_matmul.h: C(M,N) [+]= op(A)(M,K) @ op(B)(K,N) [+ bias(N)] with oneDNN.
// A and B are f32, bf16 or f16; C and bias are always f32 (low-precision products
// accumulate in f32 inside oneDNN). Primitives are created once per shape and reused
// (oneDNN's "describe, create, execute" pattern); creation is the slow part.
#pragma once
#include <cstdint>

namespace gt::cpu {

/// Element type of the A and B operands.
enum class MmType { f32, bf16, f16 };

/// Row-major operands. trans_a: A is stored (K,M); trans_b: B is stored (N,K).
/// accumulate: C += result (oneDNN sum post-op) instead of C = result. bias may be null.
/// gelu: apply GELU (tanh form) to the result as an eltwise post-op (not with accumulate).
/// Throws gt::Error when oneDNN has no kernel for the type on this CPU.
void onednn_matmul(float* c, const void* a, const void* b, const float* bias, int64_t M, int64_t N,
                   int64_t K, bool trans_a, bool trans_b, bool accumulate,
                   MmType type = MmType::f32, bool gelu = false);

/// True when oneDNN can run a `type` matrix product on this CPU (tries a tiny primitive).
bool onednn_supports(MmType type);

}  // namespace gt::cpu
