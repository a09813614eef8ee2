// backend/cpu/attention.h: causal multi-head attention as batched matrix products (oneDNN)
// plus row-wise softmax passes, one batch element (all heads) at a time.
//   forward:  S = scale Q K^T, P = causal softmax(S), O = P V      (Vaswani et al. 2017)
//   backward: dP = dO V^T, dV = P^T dO, dS = P (dP - rowsum(P dP)) scale, dQ = dS K,
//             dK = dS^T Q (the backward of FlashAttention, Dao et al. 2022, Alg. 4, without
//             its tiling over keys: a chunk's score rows are complete, so the softmax needs
//             no online rescaling).
// q, k, v (and dO) are first packed head-major, (NH,T,hs) dense, in the operand type of the
// precision policy: oneDNN then runs its brgemm kernels (AMX or AVX-512), which it does not
// for the strided views of the (B,T,3C) tensor. Scores, softmax and all sums stay fp32.
// Layouts: qkv (B,T,3C) holds q, k, v per row; head h uses columns h*hs..h*hs+hs-1 of each
// (hs = C/NH). att (B,NH,T,T): row t holds the probabilities of columns 0..t, zeros after.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gt::cpu {

/// Operand type of the attention products: f32; f32 holding values rounded to half (fp16
/// emulated where oneDNN has no f16 product); bf16; f16.
enum class AttnType { f32, f32_half, bf16, f16 };

/// Bytes of the buffers Attention keeps for one batch element (it allocates exactly this):
/// packed q, k, v, dO in the operand type, dq, dk, dv in f32, the (NH,T,T) dP in f32, the
/// (NH,T,T) P in f32 when `fused` (no stored att), and 16-bit (or rounded) copies of P and dS
/// unless the type is f32.
size_t attention_workspace_bytes(int T, int C, int NH, AttnType type, bool fused);

/// Causal self-attention kernels with their workspace. Not thread-safe (one per backend).
class Attention {
 public:
  void set_type(AttnType t) { type_ = t; }
  AttnType type() const { return type_; }

  /// out (B,T,C) from qkv (B,T,3C). att (B,NH,T,T) receives the probabilities (may be null:
  /// the fused form, which keeps one batch element's at a time); lse (B,NH,T) the
  /// log-sum-exp of the scaled scores (may be null).
  void forward(float* out, float* att, float* lse, const float* qkv, int B, int T, int C, int NH);

  /// dqkv (B,T,3C) ASSIGNED from dout (B,T,C), qkv and either the stored att or, when att is
  /// null, probabilities recomputed from qkv and the forward's lse.
  void backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                const float* lse, int B, int T, int C, int NH);

 private:
  struct Buffers;
  void* buffer(std::vector<unsigned char>& b, size_t bytes);
  AttnType type_ = AttnType::f32;
  std::vector<unsigned char> q_, k_, v_, do_, dq_, dk_, dv_, p_, dp_, pl_, dsl_;
};

}  // namespace gt::cpu
