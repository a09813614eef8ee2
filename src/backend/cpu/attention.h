// backend/cpu/attention.h: causal multi-head attention, one (batch element, head) pair per
// task, tasks spread over the OpenMP threads; each thread works in its own buffers with
// single-threaded oneDNN products, so the T x T scores exist for one head per thread at a
// time and there is no barrier between the steps of a head.
//   forward:  S = scale Q K^T, P = causal softmax(S), O = P V      (Vaswani et al. 2017)
//   backward: dP = dO V^T, dV = P^T dO, dS = P (dP - rowsum(P dP)) scale, dQ = dS K,
//             dK = dS^T Q (the backward of FlashAttention, Dao et al. 2022, Alg. 4, without
//             its tiling over keys: a head's score rows are complete, so the softmax needs
//             no online rescaling).
// A head's q, k, v (and dO) are first packed into dense (T,hs) blocks in the operand type of
// the precision policy, so oneDNN runs its brgemm kernels (AMX for bf16) on them. Scores,
// softmax and all sums stay fp32. The fused form with bf16 operands on a CPU with
// AVX512_BF16 runs attention_bf16.h's own kernels instead (no oneDNN call: at T 64, head size
// 32, the calls' set-up was most of the time).
// Layouts: qkv (B,T,3C) holds q, k, v per row; head h uses columns h*hs..h*hs+hs-1 of each
// (hs = C/NH). att (B,NH,T,T): row t holds the probabilities of columns 0..t, zeros after.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/aligned_vector.h"
#include "backend/cpu/attention_bf16.h"  // QkvRows

namespace gt::cpu {

/// Operand type of the attention products: f32; f32 holding values rounded to half (fp16
/// emulated where oneDNN has no f16 product); bf16; f16; f32 holding values rounded to bf16
/// (bf16 emulated where oneDNN has no bf16 product with bf16 instructions, onednn_supports:
/// CPUs without AVX-512 such as AMD Zen 3, Intel Skylake to Ice Lake).
/// The emulated forms have the numerics of the 16-bit ones: every operand rounded (nearest
/// even), the products of two rounded values exact in f32, the sums in f32.
enum class AttnType { f32, f32_half, bf16, f16, f32_bf16 };

/// The type the products of `t` run in on this CPU: bf16 as f32_bf16 and f16 as f32_half
/// where oneDNN has no such product here (onednn_supports), any other type unchanged.
AttnType attn_type_on_this_cpu(AttnType t);

/// Which kernels the fused form with bf16 operands runs. fastest (the default): attention_bf16.h's
/// own kernels where own_bf16_kernels_faster says they are the faster form, oneDNN's products
/// elsewhere; own: the own kernels wherever they take the head size; onednn: always oneDNN's
/// products (own and onednn for benchmarks and tests).
enum class AttnKernels { fastest, own, onednn };

/// Whether attention_bf16.h's own kernels are the faster form of a head of T rows and head size
/// hs here. Where oneDNN's products run on AMX tiles (onednn_uses_amx): while T x hs <= 65536
/// when the own kernels' products run on AMX tiles too (own_amx_enabled), else while T x hs <=
/// 4096. bench/attention_bf16.cpp on an Intel Xeon 5th gen (2 threads, 2026-12-06; oneDNN /
/// own time, forward + backward) with the own kernels on AMX: 2.17 at T 64 hs 32, 1.93 at
/// T 64 hs 64, 1.59 at T 128 hs 64, 1.49 at T 64 hs 128, 1.35 at T 256 hs 64, 1.53 at T 256
/// hs 32, 1.01 at T 1024 hs 64; on the vector unit alone (a Xeon with AMX, 2026-12-05) 1.43
/// at T 64 hs 32, 1.12 at T 128 hs 32, 1.11 at T 64 hs 64, but 0.82 at T 256 hs 32, 0.79 at
/// T 128 hs 64, 0.86 at T 64 hs 128 and 0.59 at T 256 hs 64 (a oneDNN call's fixed cost
/// dominates small heads, AMX's rate large ones). Elsewhere oneDNN multiplies with the same
/// AVX512-BF16 instructions as the own kernels, which also skip the masked triangle: always
/// true (on an AMD EPYC Zen 4, 2026-12-01, the own kernels were 2.5x faster at T 64 hs 32,
/// 1.6x at T 256 hs 64, 1.2x at T 1024 hs 64).
bool own_bf16_kernels_faster(int T, int hs);

/// Bytes of the buffers Attention keeps at most for calls of up to T rows under
/// AttnKernels::fastest (it allocates exactly this for calls of T rows, or of the shorter ones
/// that run the own kernels where T runs oneDNN's products), for `threads` threads:
/// per thread, q, k, v, dO of one head (T,hs) in the operand type, a (T,hs) f32 result, the
/// (T,T) dP in f32, the
/// (T,T) P in f32 when `fused` (no stored att), 16-bit (or rounded) copies of P and dS unless
/// the type is f32, and oneDNN's scratchpad for the products. The fused bf16 form on
/// attention_bf16.h's kernels (AttnKernels::fastest's choice) keeps attn_bf16_head_bytes(T, hs)
/// per thread instead; where T runs oneDNN's products, the larger of that plan and the own
/// kernels' buffer at the most rows they take.
/// The type is mapped by attn_type_on_this_cpu first, as set_type does.
size_t attention_workspace_bytes(int T, int C, int NH, AttnType type, bool fused, int threads);

/// Causal self-attention kernels with their workspace. Not thread-safe (one per backend).
class Attention {
 public:
  /// The operand type; bf16 and f16 run emulated where oneDNN lacks them (attn_type_on_this_cpu).
  void set_type(AttnType t) { type_ = attn_type_on_this_cpu(t); }
  /// The type the products run in (after attn_type_on_this_cpu).
  AttnType type() const { return type_; }
  /// Which kernels the fused form with bf16 operands runs (AttnKernels; fastest by default).
  /// The own kernels need bf16, a CPU with AVX512_BF16 and a head size they take.
  void set_bf16_kernels(AttnKernels k) { kernels_ = k; }
  /// Whether forward/backward without att run attention_bf16.h's kernels for this shape
  /// (T rows, C channels, NH heads).
  bool uses_own_bf16_kernels(int T, int C, int NH) const;

  /// out (B,T,C) from qkv (B,T,3C); out may be null when out16 is not (bf16 only). att (B,NH,T,T)
  /// receives the probabilities (may be null: the fused form, which keeps one batch element's at a
  /// time); lse (B,NH,T) the log-sum-exp of the scaled scores (may be null); out16 (B,T,C), if not
  /// null, a bf16 copy of out. qkv f32 or bf16, in every form and operand type: a bf16 qkv gives
  /// the results of the f32 qkv of its (widened) values, and of an f32 qkv it rounds to nearest
  /// even under bf16 operands (each form rounds q, k, v so as it packs them).
  void forward(float* out, float* att, float* lse, QkvRows qkv, int B, int T, int C, int NH,
               uint16_t* out16 = nullptr);

  /// dqkv (B,T,3C) ASSIGNED from dout (B,T,C), qkv and either the stored att or, when att is
  /// null, probabilities recomputed from qkv and the forward's lse; dqkv16 (B,T,3C), if not
  /// null, a bf16 copy of dqkv. dqkv may be null when dqkv16 is not (the bf16 copy only).
  /// qkv as forward's.
  void backward(float* dqkv, const float* dout, QkvRows qkv, const float* att, const float* lse,
                int B, int T, int C, int NH, uint16_t* dqkv16 = nullptr);

  /// Whether a bf16 qkv of C channels in NH heads is worth having under bf16 operands: this CPU
  /// has bf16 products (attn_type_on_this_cpu keeps bf16), so each form packs it as it is (own
  /// kernels and oneDNN's alike), and C is a multiple of NH. (Every form takes one anyway.)
  static bool takes_bf16_qkv(int C, int NH);

 private:
  // the fused form (no stored att): causal query blocks, scores of one block at a time
  void forward_blocks(float* out, float* lse, QkvRows qkv, int B, int T, int C, int NH,
                      uint16_t* out16);
  void backward_blocks(float* dqkv, const float* dout, QkvRows qkv, const float* lse, int B, int T,
                       int C, int NH, uint16_t* dqkv16);
  /// Runs f(buf, b, h) for every (batch element, head) pair, spread over the OpenMP threads,
  /// each with its own buffer (pl.total bytes) holding that head's packed q, k, v; fences
  /// the streaming stores before returning. Call outside parallel regions.
  template <class Plan, class F>
  void each_head(const Plan& pl, QkvRows qkv, int B, int NH, F f);
  /// Runs f(buf, b, h) for every (batch element, head) pair, spread over the OpenMP threads,
  /// each with its own buffer of `bytes`; fences the streaming stores before returning.
  template <class F>
  void for_heads(size_t bytes, int B, int NH, F f);
  /// One buffer per thread, of the bytes the call's form needs (attention_workspace_bytes /
  /// threads at most, under AttnKernels::fastest).
  unsigned char* thread_buffer(int thread, size_t bytes);
  AttnType type_ = AttnType::f32;
  AttnKernels kernels_ = AttnKernels::fastest;
  std::vector<AlignedVector<unsigned char>> per_thread_;
};

}  // namespace gt::cpu
