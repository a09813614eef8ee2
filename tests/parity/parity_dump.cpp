// Writes what torch_parity.py compares against PyTorch: a small GPT's initial weights, one
// batch, its logits, loss and gradients, and the losses of 10 AdamW steps on that batch
// (with gradient clipping), all through the engine's own model and optimizer code.
// Usage: parity_dump OUT_DIR [fp32|bf16] [fused]  (bf16: matrix products in bf16, fp32 master
// weights; fused: the model's fusion=on forms)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "train/safetensors.h"
#include "train/trainer.h"

using namespace gt;

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4 || (argc == 4 && std::string(argv[3]) != "fused")) {
    std::fprintf(stderr, "usage: parity_dump OUT_DIR [fp32|bf16] [fused]\n");
    return 2;
  }
  const bool fused = argc == 4;
  std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out);
  TrainConfig cfg;
  cfg.model = {2, 4, 32, 16, 37};
  cfg.batch_size = 3;
  cfg.learning_rate = 3e-3;
  cfg.weight_decay = 0.1;
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.99;
  cfg.eps = 1e-8;
  cfg.grad_clip = 1.0;
  const int B = cfg.batch_size, T = cfg.model.block_size, V = cfg.model.vocab_size;
  auto be = make_backend("cpu");
  const Precision precision = parse_precision(argc >= 3 ? argv[2] : "fp32");
  be->set_precision(precision);
  GPT model(cfg.model, B, Recompute::none, *be, fused);
  model.init_weights(2024);
  be->weights_updated();
  auto dump = [&](const std::string& file, Arena& a) {
    std::vector<NamedTensor> ts;
    for (size_t i = 0; i < model.specs().size(); ++i)
      ts.push_back({model.specs()[i].name, model.specs()[i].shape, a.at(i).f32()});
    write_safetensors((out / file).string(), ts);
  };
  dump("init.safetensors", model.params());
  std::mt19937 g(7);
  std::vector<int32_t> in(B * T), tg(B * T);
  for (auto& x : in) x = g() % V;
  for (auto& x : tg) x = g() % V;
  // the logits of a forward without targets (the fused loss overwrites them with its gradient)
  model.forward(in.data(), nullptr, B, T);
  write_safetensors((out / "logits.safetensors").string(),
                    {{"logits", Shape{B, T, V}, model.logits().data()}});
  model.zero_grad();
  float loss = model.forward(in.data(), tg.data(), B, T);
  model.backward(1.0f / (B * T));
  dump("grads.safetensors", model.grads());
  Arena m("m"), v("v");
  for (auto& s : model.specs()) m.plan(s.name, s.shape), v.plan(s.name, s.shape);
  m.allocate(*be);
  v.allocate(*be);
  std::vector<double> losses;
  for (int step = 1; step <= 10; ++step) {
    model.zero_grad();
    losses.push_back(model.forward(in.data(), tg.data(), B, T));
    model.backward(1.0f / (B * T));
    clip_and_update(*be, model, m, v, cfg, static_cast<float>(cfg.learning_rate), step);
  }
  nlohmann::json j;
  j["config"] = {{"n_layer", cfg.model.n_layer},
                 {"n_head", cfg.model.n_head},
                 {"n_embd", cfg.model.n_embd},
                 {"block_size", T},
                 {"vocab_size", V},
                 {"batch_size", B},
                 {"lr", cfg.learning_rate},
                 {"weight_decay", cfg.weight_decay},
                 {"beta1", cfg.beta1},
                 {"beta2", cfg.beta2},
                 {"eps", cfg.eps},
                 {"grad_clip", cfg.grad_clip}};
  j["precision"] = to_string(precision);
  j["fused"] = fused;
  j["inputs"] = in;
  j["targets"] = tg;
  j["loss"] = loss;
  j["losses"] = losses;
  std::ofstream(out / "parity.json") << j.dump(1);
  return 0;
}
