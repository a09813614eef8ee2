// backend/cuda/lt_emulation.h: cuBLASLt's contract for the emulated device (cuda-emu): what a
// product call is, which calls the real library refuses, and a log of the calls a run makes
// (so the set of products a GPU will be asked for is known and reviewed before it runs).
//
// The refusals (cuBLAS documentation, "cublasLtMatmul()", its FP8 requirements and the
// datatype tables; cublasLt.h's comments on CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE and the GELU
// epilogues):
//   - fp8 operands need the "TN" layout (A transposed, B not), leading dimensions and the
//     shared dimension k multiples of 16, 16-byte aligned pointers, and not E5M2 x E5M2;
//   - fp8 scale pointers 16-byte aligned: not in the documentation, but on an H200
//     (cuBLASLt 13.1) cublasLtMatmul refused every fp8 product whose scale pointers were
//     4-byte aligned, with no message, though its heuristic had found algorithms; it took them
//     once they were 16-byte aligned and the heuristic saw the real pointers (the same change
//     made both, so which one it needed is not known);
//   - the GELU_AUX and DGELU epilogues: an aux matrix with a leading dimension divisible by 8
//     and no less than D's rows (cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD), of D's
//     type (_AUX_DATA_TYPE's default; other types only for fp8 outputs), aligned to its
//     element; DGELU with a bias is DGELU_BGRAD (a bias gradient), not used here;
//   - the BGRADA and BGRADB epilogues (bias gradients): the bias pointer is their output, of
//     D's type (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER: "Bias gradient vector elements
//     are the same type as the output elements"), so it must be given and aligned to D's
//     element; no aux matrix;
//   - fp8 with an f32 output takes a bias only as bf16 and no GELU epilogue; nor here a bias
//     gradient epilogue, which the backend does not ask of fp8 products (whether cuBLASLt has
//     fp8 BGRAD kernels was not checked: refused as an epilogue only); greentrain also
//     refuses an fp8 operand without its scale pointer (its copies are always scaled);
//   - 16-bit and f32 operands pair only with their own type; the bias has D's type;
//   - a pointer less aligned than its element, or than the alignment the plan declared;
//   - leading dimensions below the rows they hold, sizes below 1.
#pragma once
#include <string>
#include <vector>

#include "backend/cuda/host_plan.h"

namespace gt::cuda_lt {

/// One cublasLtMatmul call: the plan, the operand and output types, the pointers, the
/// epilogue, and the fp8 scale pointers (null: not given). bias: the bias read (D's type), or
/// with a bias gradient epilogue (cuda_plan::bias_gradient) the bias gradient written.
struct Call {
  cuda_plan::Gemm g;
  cuda_plan::LtType a, b, d;
  const void *pa, *pb, *pd, *bias;
  cuda_plan::LtEpilogue ep;
  const void *scale_a, *scale_b;
};

/// Why the real library would refuse a call; epilogue_only: it would take the same product
/// without the epilogue (the caller may apply the epilogue itself).
struct Refusal {
  bool refused = false;
  bool epilogue_only = false;
  std::string why;
};
Refusal refusal(const Call& c);

/// "A bf16 T (lda 768), B bf16 N (ldb 768) -> D f32 (ldd 2304): m 2304, n 1024, k 768,
/// beta 0, epilogue bias" (no pointers: the same for every run of a model).
std::string describe(const Call& c);

/// Starts (clearing the log) or stops logging calls; every call is logged while on.
void record_products(bool on);
/// The calls logged, each as describe() writes it, in call order.
std::vector<std::string> recorded_products();
/// Logs c when logging is on.
void record(const Call& c);

}  // namespace gt::cuda_lt
