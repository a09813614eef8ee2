// backend/cuda/host_plan.h: what the CUDA backend decides on the host, as pure functions that
// the host test (tests/backend/cuda_host_math_test.cpp) checks on every machine:
//  - the matrix products of backend.h (row-major, Hugging Face Conv1D weight layout) written
//    as the column-major BLAS products cuBLASLt takes, D(m,n) = op(A)(m,k) op(B)(k,n) + beta D;
//    the test runs each plan through a plain column-major product against the reference;
//  - the token index of the deterministic embedding backward.
//
// A row-major (R, K) matrix is the column-major (K, R) matrix with leading dimension K, so
// out(N,OC) = inp(N,C) @ W(C,OC) is, column-major, out^T(OC,N) = W^T(OC,C) inp^T(C,N).
#pragma once
#include <cstdint>
#include <vector>

namespace gt::cuda_plan {

/// The element type of a product operand or output, as cuBLASLt names them (cudaDataType_t:
/// CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F, CUDA_R_8F_E4M3, CUDA_R_8F_E5M2).
enum class LtType { f32, bf16, f16, e4m3, e5m2 };
/// Bytes of one element.
inline int lt_bytes(LtType t) {
  return t == LtType::f32 ? 4 : (t == LtType::bf16 || t == LtType::f16) ? 2 : 1;
}
/// "f32", "bf16", ...
inline const char* lt_name(LtType t) {
  switch (t) {
    case LtType::f32:
      return "f32";
    case LtType::bf16:
      return "bf16";
    case LtType::f16:
      return "f16";
    case LtType::e4m3:
      return "e4m3";
    default:
      return "e5m2";
  }
}

/// The epilogue of a product beyond its bias (cublasLtEpilogue_t), x being the product plus
/// the bias: none (D = x); gelu (D = gelu(x): CUBLASLT_EPILOGUE_GELU[_BIAS]); gelu_aux
/// (D = gelu(x), and x written to the aux matrix: GELU_AUX[_BIAS]); dgelu (D = x * gelu'(aux),
/// the aux matrix read: DGELU; no bias, which DGELU_BGRAD would make a bias gradient);
/// bgrada / bgradb (D = x, and the bias pointer is an output: the bias gradient, written, not
/// accumulated: CUBLASLT_EPILOGUE_BGRADA, the m sums over k of op(A) (m x k), "the number of
/// rows of the matrix D"; BGRADB, the n sums over k of op(B) (k x n), "the number of columns of
/// the matrix D"; elements of D's type, "the same type as the output elements (Ctype)":
/// cublasLt.h, cublasLtEpilogue_t and CUBLASLT_MATMUL_DESC_BIAS_POINTER).
enum class LtEpi { none, gelu, gelu_aux, dgelu, bgrada, bgradb };
/// "none", "gelu", "gelu_aux", "dgelu", "bgrada", "bgradb".
inline const char* epi_name(LtEpi e) {
  switch (e) {
    case LtEpi::none:
      return "none";
    case LtEpi::gelu:
      return "gelu";
    case LtEpi::gelu_aux:
      return "gelu_aux";
    case LtEpi::dgelu:
      return "dgelu";
    case LtEpi::bgrada:
      return "bgrada";
    default:
      return "bgradb";
  }
}
/// Whether e writes the bias pointer (a bias gradient) instead of reading it.
inline bool bias_gradient(LtEpi e) { return e == LtEpi::bgrada || e == LtEpi::bgradb; }
/// A product's epilogue: the kind, and for gelu_aux and dgelu the aux matrix (m x n,
/// column-major, leading dimension ld in elements, D's type: cublasLt.h,
/// CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, _AUX_LD and _AUX_DATA_TYPE).
struct LtEpilogue {
  LtEpi kind = LtEpi::none;
  const void* aux = nullptr;
  int64_t ld = 0;
};

/// The tensors a product reads: the weight, the activation input (inp) and the gradient of
/// the output (dout).
enum class Role { weight, input, grad };

/// One column-major product: D(m,n) (leading dimension ldd) = op(A)(m,k) op(B)(k,n) + beta D.
/// ta/tb: the operand is stored transposed (op = T); A is stored (m,k) when !ta, (k,m) when ta,
/// with leading dimension lda (B alike).
struct Gemm {
  Role a, b;
  bool ta, tb;
  int64_t m, n, k;
  int64_t lda, ldb, ldd;
  float beta;
  /// The least alignment in bytes a plan declares for A, B and D (cuBLASLt's
  /// CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES); 0: taken from each call's pointers. A plan
  /// kept for many calls declares it, and every pointer it gets must be so aligned.
  uint32_t align_a = 0, align_b = 0, align_d = 0;
};

/// The alignment in bytes of address p, at most 256 (what cuBLASLt's preference takes).
inline uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t low = a & (~a + 1);
  return static_cast<uint32_t>(a == 0 || low > 256 ? 256 : low);
}

/// out(N,OC) = inp(N,C) @ W: W (C,OC), or (OC,C) when w_transposed. The bias (OC) is the
/// column-major product's per-row bias (m = OC), as cuBLASLt's BIAS epilogue adds it.
inline Gemm forward(int64_t N, int64_t C, int64_t OC, bool wt) {
  return wt ? Gemm{Role::weight, Role::input, true, false, OC, N, C, C, C, OC, 0.0f}
            : Gemm{Role::weight, Role::input, false, false, OC, N, C, OC, C, OC, 0.0f};
}
/// dinp(N,C) = dout(N,OC) @ W^T (assigned).
inline Gemm backward_input(int64_t N, int64_t C, int64_t OC, bool wt) {
  return wt ? Gemm{Role::weight, Role::grad, false, false, C, N, OC, C, OC, C, 0.0f}
            : Gemm{Role::weight, Role::grad, true, false, C, N, OC, OC, OC, C, 0.0f};
}
/// dW += inp^T @ dout: dW (C,OC), or (OC,C) when w_transposed (accumulated: beta = 1).
inline Gemm backward_weight(int64_t N, int64_t C, int64_t OC, bool wt) {
  return wt ? Gemm{Role::input, Role::grad, false, true, C, OC, N, C, OC, C, 1.0f}
            : Gemm{Role::grad, Role::input, false, true, OC, C, N, OC, C, OC, 1.0f};
}

/// The epilogue that makes the bias gradient (the column sums of dout (N,OC): OC sums over the
/// N tokens) in backward_weight's product g: the reduced dimension k is N there, and dout is
/// A (op(A) = dout^T (OC,N), D's rows: BGRADA) when dW is (C,OC), B (op(B) = dout (N,OC), D's
/// columns: BGRADB) when w_transposed.
inline LtEpi bias_gradient_epilogue(const Gemm& g) {
  return g.a == Role::grad ? LtEpi::bgrada : LtEpi::bgradb;
}

/// The fp8 forms: cuBLASLt's fp8 products take A transposed and B not ("TN"; cuBLASLt docs,
/// cublasLtMatmul, FP8 requirements), so the operands are fp8 copies in the layouts these
/// plans name. forward_fp8: A = W^T (OC,C) for w (C,OC), or w itself when w_transposed.
inline Gemm forward_fp8(int64_t N, int64_t C, int64_t OC) { return forward(N, C, OC, true); }
/// backward_input_fp8: A = W (C,OC) as stored (w_transposed: the (C,OC) transpose of w).
inline Gemm backward_input_fp8(int64_t N, int64_t C, int64_t OC) {
  return backward_input(N, C, OC, false);
}
/// backward_weight_fp8: A and B are the transposes dout^T (OC,N) and inp^T (C,N) (row-major);
/// dW (C,OC): A = dout^T, B = inp^T; dW (OC,C) when w_transposed: A = inp^T, B = dout^T.
inline Gemm backward_weight_fp8(int64_t N, int64_t C, int64_t OC, bool wt) {
  return wt ? Gemm{Role::input, Role::grad, true, false, C, OC, N, N, N, C, 1.0f}
            : Gemm{Role::grad, Role::input, true, false, OC, C, N, N, N, OC, 1.0f};
}
/// Whether cuBLASLt's fp8 product takes these sizes (every dimension a multiple of 16).
inline bool fp8_sizes_ok(int64_t N, int64_t C, int64_t OC) {
  return N % 16 == 0 && C % 16 == 0 && OC % 16 == 0;
}

/// Element (row, col) of a column-major matrix stored with leading dimension ld, read through
/// op (transposed when t): for the host test's plain product.
inline float at(const float* p, bool t, int64_t row, int64_t col, int64_t ld) {
  return t ? p[col + row * ld] : p[row + col * ld];
}

/// The token index of embedding_backward: for tokens (n ids >= 0) the distinct ids in
/// increasing order (U of them), then U+1 offsets, then the n positions grouped by id, each
/// group in increasing position: [ids (U)] [off (U+1)] [pos (n)]. Returns U. Counting sort,
/// O(n + max id). Errors: none (the caller checks the ids are >= 0).
inline int32_t token_index(const std::vector<int32_t>& tokens, std::vector<int32_t>& idx) {
  int32_t vmax = 0;
  for (int32_t t : tokens) vmax = t > vmax ? t : vmax;
  std::vector<int32_t> count(static_cast<size_t>(vmax) + 1, 0);
  for (int32_t t : tokens) ++count[t];
  idx.clear();
  for (size_t v = 0; v < count.size(); ++v)
    if (count[v]) idx.push_back(static_cast<int32_t>(v));
  const int32_t U = static_cast<int32_t>(idx.size());
  std::vector<int32_t> start(count.size(), 0);
  int32_t acc = 0;
  for (int32_t u = 0; u < U; ++u) {
    idx.push_back(acc);
    start[idx[u]] = acc;
    acc += count[idx[u]];
  }
  idx.push_back(acc);
  const size_t pos0 = idx.size();
  idx.resize(pos0 + tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    idx[pos0 + start[tokens[i]]++] = static_cast<int32_t>(i);
  return U;
}

}  // namespace gt::cuda_plan
