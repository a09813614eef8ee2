// train/hf_gpt2.h: Hugging Face GPT-2 checkpoint folders (config.json, model.safetensors,
// vocab.json + merges.txt): `greentrain train --init-from DIR` starts from one, `eval` and
// `sample` read one as they read a run folder, and every greentrain checkpoint folder is one
// (it holds config.json beside model.safetensors, and a gpt2 tokenizer's files).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "train/config.h"

namespace gt {

struct LoadedModel;

/// Whether dir holds config.json and model.safetensors (and is not a greentrain run folder).
bool is_hf_gpt2_dir(const std::string& dir);

/// The model of DIR/config.json (GPT2Config: n_layer, n_head, n_embd, n_positions -> block_size,
/// vocab_size). Throws gt::Error naming the file and key for a missing key or one that is not a
/// positive integer, or a setting that
/// greentrain's GPT does not compute: activation_function other than gelu_new (or its alias
/// gelu_pytorch_tanh), layer_norm_epsilon other than 1e-5, untied embeddings, cross-attention,
/// scale_attn_by_inverse_layer_idx or reorder_and_upcast_attn.
GPTConfig read_hf_gpt2_config(const std::string& dir);

/// Sets cfg.model from DIR/config.json and, when DIR holds vocab.json and merges.txt (or a
/// SentencePiece tokenizer.model), the tokenizer (data.tokenizer and data.tokenizer_path or
/// data.tokenizer_model), since the embedding rows are that tokenizer's. Each key changed is
/// noted on `log` (when not null). Errors name the folder as `named` says, as the user gave it
/// ("--init-from DIR", or a command's DIR argument).
void apply_hf_gpt2_config(const std::string& dir, TrainConfig& cfg, FILE* log,
                          const std::string& named);

/// config.json for a model of shape c, as transformers' GPT2Config reads it: activation
/// "gelu_new" (the tanh approximation greentrain computes), LayerNorm eps 1e-5, no dropout,
/// tied input and output embeddings.
std::string hf_gpt2_config_json(const GPTConfig& c);

/// Loads a Hugging Face folder: its configuration (with `sets`, "key=value", applied after;
/// the model keys stay the folder's), its tokenizer when it has one ("ids" of its vocabulary
/// otherwise), and model.safetensors ("transformer."-prefixed names and a tied lm_head.weight
/// accepted). step is 0. Throws gt::Error naming the file at fault.
LoadedModel load_hf_gpt2(const std::string& dir, int max_batch,
                         const std::vector<std::string>& sets);

}  // namespace gt
