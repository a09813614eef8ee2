// backend/cpu/attention_bf16.h: causal attention of one (batch element, head) pair with bf16
// operands and fp32 accumulation, products written with AVX512-BF16 (VDPBF16PS: 16 fp32 lanes,
// each += a[2i] b[2i] + a[2i+1] b[2i+1], Intel SDM vol. 2) instead of oneDNN calls. For small
// heads (T = 64, hs = 32: six products of ~0.1 MFLOP each per head) a oneDNN call's fixed
// set-up of a few microseconds was most of the time; here a head is a few loops over 16-row
// tiles, and the masked upper triangle is skipped in 16-key steps.
// The arithmetic is attention.h's fused form: S = scale q k^T (fp32), P = causal softmax(S)
// (fp32, exp512), O = P v with P rounded to bf16; backward dP = dO v^T, dS = P (dP -
// rowsum(P dP)) scale, dQ = dS k, dK = dS^T q, dV = P^T dO, with P and dS rounded to bf16 as
// operands. Every operand is rounded to bf16 (nearest even, VCVTNE2PS2BF16) and every product
// and sum is accumulated in fp32; the bf16 output copies are rounded as to_bf16.
// Queries are taken in chunks of up to 64, their scores transposed (keys as rows, 16 queries
// per vector), so that a softmax over keys is element-wise over rows, 16 queries at once.
// Operand layouts (a "word" is two bf16 side by side, what VDPBF16PS multiplies pairwise):
// the left operand of a product is read one word at a time (broadcast), the right one as
// VNNI rows: word (p, n) = (B[2p][n], B[2p+1][n]), 16 columns n per vector. Rows are padded to
// Tp = T rounded up to 16 with zeros.
// Where the CPU has AMX and greentrain's own AMX code is on (own_amx_enabled, amx_matmul.h), the
// products run on AMX tiles instead (TDPBF16PS: the same bf16 operands, each sum in f32; Intel
// SDM vol. 2): the scores, dP, dK and dV take their left operands as stored, O and dQ take P's
// and dS's words of 16 queries transposed into rows first. At T 64, head size 32 (2 threads,
// Xeon 5th gen) that made the forward 1.4x and the backward 1.9x as fast.
// Only compiled to kernels where the compiler targets AVX512_BF16 (GT_ATTN_BF16 is then 1);
// elsewhere attn_bf16_supported() is false and attention.cpp uses oneDNN.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gt::cpu {

/// Rows of a (B,T,3C) qkv tensor (q, k, v of each row side by side, 3C elements a row): f32,
/// or bf16 (the qkv product's bf16 output, Backend::bf16_qkv). Exactly one pointer is set (or
/// neither: no tensor); both convert implicitly from their pointer. A bf16 qkv gives the
/// results of the f32 qkv it rounds (nearest even): every kernel rounds q, k, v to bf16 as it
/// loads them, and a bf16 value's rounding is itself.
struct QkvRows {
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;
  QkvRows() = default;
  QkvRows(const float* p) : f32(p) {}
  QkvRows(const uint16_t* p) : bf16(p) {}
  /// The rows from element offset n on (the same type).
  QkvRows operator+(int64_t n) const {
    QkvRows r;
    if (f32) r.f32 = f32 + n;
    if (bf16) r.bf16 = bf16 + n;
    return r;
  }
  explicit operator bool() const { return f32 || bf16; }
};

/// True when this build has the kernels (AVX512_BF16 targeted) and they take head size hs:
/// a multiple of 16 from 16 to 128. Any T >= 1.
bool attn_bf16_supported(int hs);

/// Bytes of one thread's buffer for heads of T rows and size hs (forward and backward alike):
/// the packed q, k, v, dO in bf16 (several layouts); fp32 scores and dP, and bf16 P and dS,
/// of up to 64 queries by T keys; fp32 dK, dV of the head. About 80 KiB for T 64, hs 32.
size_t attn_bf16_head_bytes(int T, int hs);

/// Forward of one head. qkv: this head's q at row 0 (qkv + b T 3C + h hs), f32 or bf16; rows
/// are 3C elements apart, k is C elements after q and v 2C. out (row stride C) and out16 (the same
/// in bf16) get the T x hs output, either may be null. lse (T floats) receives the log-sum-exp of
/// each row of scaled scores. buf: attn_bf16_head_bytes(T, hs) bytes, 64-byte aligned. Requires
/// attn_bf16_supported(hs).
void attn_bf16_forward_head(unsigned char* buf, QkvRows qkv, int T, int C, int hs, float* out,
                            uint16_t* out16, float* lse);

/// Backward of one head, with the probabilities recomputed from qkv and the forward's lse.
/// dout: this head's dO at row 0 (row stride C). dqkv (row stride 3C, this head's dq at row 0;
/// dk at +C, dv at +2C) is ASSIGNED; dqkv16 is the same in bf16; either may be null.
/// buf and requirements as attn_bf16_forward_head.
/// Both functions write their f32 outputs with streaming stores: call _mm_sfence() (or leave
/// the OpenMP region, as Attention::for_heads does after its fence) before another thread
/// reads them.
void attn_bf16_backward_head(unsigned char* buf, QkvRows qkv, const float* dout, const float* lse,
                             int T, int C, int hs, float* dqkv, uint16_t* dqkv16);

}  // namespace gt::cpu
