// model/gpt_plan.h: what the GPT (gpt.cpp) takes from its memory plan (gpt_plan.cpp): the
// indices of its planned tensors and the named views of a block's activations. Internal to
// the model library.
#pragma once
#include <cstddef>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/gpt.h"

namespace gt::gpt_plan {

/// Throws gt::Error naming the first model.* or train.batch_size value that is not positive,
/// or n_embd not divisible by n_head.
void validate(const GPTConfig& c, int B);

/// Indices of the planned tensors in their arenas (SIZE_MAX: not planned).
struct Plans {
  std::vector<std::vector<size_t>> layer_idx;  ///< [layer][row of the activation table] in acts
  std::vector<size_t> resid_idx;               ///< the L+1 residual streams
  size_t lnf, lnf_mean, lnf_rstd, logits, probs, losses, inputs, targets;
  size_t dres, dC, dqkv, d4C, d4C16, dlogits, tmpC;  ///< in scratch
};

/// Plans parameters and gradients (specs), activations and the backward's scratch for
/// micro-batches of up to B sequences under recompute policy rc. act16: product inputs stored
/// as bf16; dgelu16: fch_dgelu stored as bf16 (under bf16); qkv16: qkv stored as bf16 (the qkv
/// product's output, read so by the fused attention); gelu_input: the fc product's epilogue
/// writes the GELU's input into fch_dgelu, so no f32 fch.
Plans plan_arenas(const GPTConfig& c, int B, Recompute rc, bool fused, bool act16, bool dgelu16,
                  bool qkv16, bool gelu_input, const std::vector<ParamSpec>& specs, Arena& params,
                  Arena& grads, Arena& acts, Arena& scratch);

/// The named views of block l's activations in the allocated `acts` (a tensor not planned: a
/// null view); x and out are residual streams l and l + 1.
LayerActivations layer_views(Arena& acts, const Plans& p, int l);

/// Whether qkv is a bf16 tensor: under bf16 activations with fusion on, where the backend's
/// fused attention takes one (Backend::bf16_qkv).
bool qkv_bf16(const GPTConfig& c, bool fused, bool act16, const Backend& be);

/// Whether the fused MLP keeps fch itself in fch_dgelu (Backend::saves_gelu_input: the
/// products apply GELU and gelu' in their epilogues) rather than gelu'(fch): only where no
/// policy recomputes the MLP (the recomputation's GELU pass writes gelu'). No f32 fch then.
bool gelu_input_saved(Recompute rc, bool fused, const Backend& be);

}  // namespace gt::gpt_plan
