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

/// One operand of a strided batched product: a (D0, D1, rows, cols) view of memory, with
/// strides in elements for each of the four dimensions.
struct Strided {
  int64_t s0, s1, row, col;
};

/// Batched product over two batch dimensions: for every (i, j) in (D0, D1),
/// C[i,j](M,N) = alpha * A[i,j](M,K) @ B[i,j](K,N). All f32 except a and b, which are
/// `type`. Any strides (so q, k and v can be read in place from a (B,T,3C) qkv tensor, and
/// transposes are stride swaps). Throws gt::Error when oneDNN has no kernel.
void onednn_batched_matmul(float* c, Strided cs, const void* a, Strided as, const void* b,
                           Strided bs, int64_t D0, int64_t D1, int64_t M, int64_t N, int64_t K,
                           float alpha, MmType type = MmType::f32);

/// True when oneDNN can run a `type` matrix product on this CPU (tries a tiny primitive).
bool onednn_supports(MmType type);

}  // namespace gt::cpu
