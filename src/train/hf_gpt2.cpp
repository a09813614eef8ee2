#include "train/hf_gpt2.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/model_memory.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace gt {
namespace {

bool has(const std::string& dir, const char* name) {
  return fs::is_regular_file(fs::path(dir) / name);
}

}  // namespace

bool is_hf_gpt2_dir(const std::string& dir) {
  return has(dir, "config.json") && has(dir, "model.safetensors");
}

GPTConfig read_hf_gpt2_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: invalid JSON: {}", path, e.what()));
  }
  auto get_int = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (j.contains(k) && j[k].is_number_integer()) {
        // model.* would name a key of greentrain's configuration that the user did not write
        if (j[k].get<int64_t>() <= 0 || j[k].get<int64_t>() > (1 << 30))
          throw Error(fmt::format("{}: {} = {}; expected a positive integer", path, k,
                                  j[k].get<int64_t>()));
        return j[k].get<int>();
      }
    throw Error(
        fmt::format("{}: key '{}' is missing or not an integer; expected GPT2Config's "
                    "n_layer, n_head, n_embd, n_positions and vocab_size",
                    path, *keys.begin()));
  };
  GPTConfig c;
  c.n_layer = get_int({"n_layer", "num_hidden_layers"});
  c.n_head = get_int({"n_head", "num_attention_heads"});
  c.n_embd = get_int({"n_embd", "hidden_size"});
  c.block_size = get_int({"n_positions", "n_ctx", "max_position_embeddings"});
  c.vocab_size = get_int({"vocab_size"});
  auto refuse = [&](const std::string& key, const std::string& value, const std::string& want) {
    throw Error(fmt::format("{}: {} = {}; greentrain's GPT computes {}", path, key, value, want));
  };
  if (j.contains("model_type") && j["model_type"] != "gpt2")
    refuse("model_type", j["model_type"].dump(), "\"gpt2\" models");
  const std::string act = j.value("activation_function", std::string("gelu_new"));
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    refuse("activation_function", act, "GELU's tanh approximation (gelu_new)");
  const double eps = j.value("layer_norm_epsilon", 1e-5);
  if (std::abs(eps - 1e-5) > 1e-12) refuse("layer_norm_epsilon", fmt::format("{}", eps), "1e-5");
  if (!j.value("tie_word_embeddings", true))
    refuse("tie_word_embeddings", "false", "a tied output layer (lm_head = wte)");
  for (const char* k :
       {"add_cross_attention", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"})
    if (j.value(k, false)) refuse(k, "true", "plain GPT-2 attention");
  if (!j.value("scale_attn_weights", true))
    refuse("scale_attn_weights", "false", "attention scaled by 1/sqrt(head size)");
  if (c.n_head <= 0 || c.n_embd % c.n_head != 0)
    throw Error(
        fmt::format("{}: n_embd = {} is not divisible by n_head = {}", path, c.n_embd, c.n_head));
  return c;
}

void apply_hf_gpt2_config(const std::string& dir, TrainConfig& cfg, FILE* log,
                          const std::string& named) {
  if (!is_hf_gpt2_dir(dir))
    throw Error(
        fmt::format("{}: expected a Hugging Face GPT-2 folder with config.json and "
                    "model.safetensors",
                    named));
  const GPTConfig m = read_hf_gpt2_config(dir);
  auto note = [&](const char* key, const std::string& was, const std::string& now) {
    if (log && was != now)
      std::fprintf(log, "note: %s = %s from %s (the configuration said %s)\n", key, now.c_str(),
                   dir.c_str(), was.c_str());
  };
  note("model.n_layer", std::to_string(cfg.model.n_layer), std::to_string(m.n_layer));
  note("model.n_head", std::to_string(cfg.model.n_head), std::to_string(m.n_head));
  note("model.n_embd", std::to_string(cfg.model.n_embd), std::to_string(m.n_embd));
  note("model.block_size", std::to_string(cfg.model.block_size), std::to_string(m.block_size));
  if (cfg.model.vocab_size != 0)
    note("model.vocab_size", std::to_string(cfg.model.vocab_size), std::to_string(m.vocab_size));
  cfg.model = m;
  if (has(dir, "vocab.json") && has(dir, "merges.txt")) {
    note("data.tokenizer", cfg.tokenizer, "gpt2");
    cfg.tokenizer = "gpt2";
    cfg.tokenizer_path = dir;
    cfg.tokenizer_model.clear();
  } else if (has(dir, "tokenizer.model")) {
    note("data.tokenizer", cfg.tokenizer, "bpe");
    cfg.tokenizer = "bpe";
    cfg.tokenizer_model = (fs::path(dir) / "tokenizer.model").string();
    cfg.tokenizer_path.clear();
  } else if (cfg.data_format == "text") {
    // a greentrain checkpoint folder of a char or byte run: its tokenizer is in state.json
    const std::string run = fs::path(dir).lexically_normal().parent_path().string();
    throw Error(fmt::format(
        "{}: the folder has no tokenizer (vocab.json and merges.txt, or tokenizer.model), so "
        "text cannot be mapped to its embedding rows; give token shards (data.format = llmc or "
        "nanogpt) made with its vocabulary{}",
        named,
        has(dir, "state.json")
            ? fmt::format(", or the run folder {} (a run's checkpoint folder: its tokenizer is "
                          "in state.json)",
                          run.empty() ? "." : run)
            : ""));
  }
}

std::string hf_gpt2_config_json(const GPTConfig& c) {
  nlohmann::ordered_json j;
  j["model_type"] = "gpt2";
  j["architectures"] = {"GPT2LMHeadModel"};
  j["vocab_size"] = c.vocab_size;
  j["n_positions"] = c.block_size;
  j["n_ctx"] = c.block_size;
  j["n_embd"] = c.n_embd;
  j["n_layer"] = c.n_layer;
  j["n_head"] = c.n_head;
  j["activation_function"] = "gelu_new";
  j["layer_norm_epsilon"] = 1e-5;
  j["resid_pdrop"] = 0.0;
  j["embd_pdrop"] = 0.0;
  j["attn_pdrop"] = 0.0;
  j["tie_word_embeddings"] = true;
  j["torch_dtype"] = "float32";
  return j.dump(2) + "\n";
}

LoadedModel load_hf_gpt2(const std::string& dir, int max_batch,
                         const std::vector<std::string>& sets) {
  LoadedModel lm;
  apply_hf_gpt2_config(dir, lm.cfg, nullptr, dir);
  const GPTConfig m = lm.cfg.model;
  apply_overrides(sets, lm.cfg);
  lm.cfg.model = m;
  lm.cfg.validate();
  if (lm.cfg.tokenizer == "gpt2" || lm.cfg.tokenizer == "bpe") {
    lm.tokenizer = Tokenizer::from_config(lm.cfg, "", dir);
  } else {
    lm.tokenizer.kind = "ids";
    lm.tokenizer.ids_vocab_size = m.vocab_size;
  }
  if (lm.tokenizer.vocab_size() > m.vocab_size)
    throw Error(fmt::format("{}: the tokenizer has {} tokens but config.json's vocab_size is {}",
                            dir, lm.tokenizer.vocab_size(), m.vocab_size));
  lm.backend = make_backend(lm.cfg.device, backend_options(lm.cfg, BackendUse::inference));
  lm.backend->set_precision(lm.cfg.precision);
  lm.model = make_gpt(lm.cfg, max_batch > 0 ? max_batch : lm.cfg.batch_size, "train.batch_size",
                      *lm.backend, /*training=*/false);
  load_parameters((fs::path(dir) / "model.safetensors").string(), *lm.model);
  lm.backend->weights_updated();
  return lm;
}

}  // namespace gt
