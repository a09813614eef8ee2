// backend/cpu/attention.h: causal multi-head attention as batched matrix products
// (oneDNN) plus row-wise softmax passes, for a chunk of batch elements at a time.
// S = scale * Q K^T and O = P V (forward); dP = dO V^T, dV = P^T dO, dS = P (dP - rowsum(P dP))
// scale, dQ = dS K, dK = dS^T Q (backward), as in Vaswani et al. 2017 and the backward of
// FlashAttention (Dao et al. 2022, Algorithm 4, without its tiling over keys: a chunk's
// score rows are complete, so the softmax needs no online rescaling).
// Layouts: qkv (B,T,3C) holds q, k, v per row; head h of each uses columns h*hs..h*hs+hs-1
// (hs = C/NH). P, dP (nb,NH,T,T) row-major; row t of P holds columns 0..t, zeros after.
#pragma once
#include <cstdint>

namespace gt::cpu {

/// Forward for batch elements b0..b0+nb-1: P (nb,NH,T,T) receives the probabilities, out
/// (B,T,C) those elements' rows, lse (nb,NH,T) the log-sum-exp of the scaled scores (may be
/// null). Scale 1/sqrt(hs).
void attention_forward_chunk(float* out, float* P, float* lse, const float* qkv, int b0, int nb,
                             int T, int C, int NH);

/// Recomputes P (nb,NH,T,T) for batch elements b0.. from qkv and the lse saved by the forward.
void attention_probs_from_lse(float* P, const float* qkv, const float* lse, int b0, int nb, int T,
                              int C, int NH);

/// Backward for batch elements b0..: dqkv (B,T,3C) rows of those elements are ASSIGNED from
/// dout (B,T,C) and P (nb,NH,T,T); dP (nb,NH,T,T) is scratch.
void attention_backward_chunk(float* dqkv, float* dP, const float* dout, const float* qkv,
                              const float* P, int b0, int nb, int T, int C, int NH);

}  // namespace gt::cpu
