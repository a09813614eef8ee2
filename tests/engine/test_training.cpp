// The model and the training loop: recompute policies, overfitting one batch, bit-exact
// resume (also when the save falls at the end of the data), and validation loss equal to
// `greentrain eval`'s.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/gpt.h"
#include "test_helpers.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace gt {
namespace {

TrainConfig tiny_config(const std::string& data_path) {
  TrainConfig c;
  c.model = {2, 2, 16, 8, 0};
  c.batch_size = 4;
  c.max_steps = 20;
  c.learning_rate = 3e-3;
  c.min_lr = 3e-4;
  c.warmup_steps = 3;
  c.eval_interval = 5;
  c.eval_steps = 3;
  c.checkpoint_interval = 0;
  c.threads = 2;
  c.data_path = data_path;
  return c;
}

std::vector<float> copy_grads(GPT& m) {
  auto& g = m.grads();
  const float* p = static_cast<const float*>(g.base());
  return std::vector<float>(p, p + g.bytes() / sizeof(float));
}

TEST(Model, ParamNamesFollowHuggingFaceGPT2) {
  GPTConfig c{2, 2, 8, 4, 11};
  auto s = gpt_param_specs(c);
  EXPECT_EQ(s.front().name, "wte.weight");
  EXPECT_EQ(s[2].name, "h.0.ln_1.weight");
  EXPECT_EQ(s[4].name, "h.0.attn.c_attn.weight");
  EXPECT_EQ(s[4].shape, (Shape{8, 24}));
  EXPECT_EQ(s.back().name, "ln_f.bias");
  // 2 embeddings + 12 per layer + final LayerNorm
  EXPECT_EQ(s.size(), 2u + 12 * 2 + 2);
  EXPECT_EQ(
      gpt_num_params(c),
      11 * 8 + 4 * 8 + 2 * (2 * 8 + 8 * 24 + 24 + 64 + 8 + 16 + 8 * 32 + 32 + 32 * 8 + 8) + 16);
}

TEST(Model, MemoryPlanMatchesAllocationAndShrinksWithRecompute) {
  GT_NEEDS_CPU_BACKEND();
  GPTConfig c{3, 2, 16, 8, 10};
  auto be = make_backend("cpu");
  size_t prev = SIZE_MAX;
  for (auto rc : {Recompute::none, Recompute::gelu, Recompute::gelu_ln, Recompute::block}) {
    GPT m(c, 4, rc, *be);
    MemoryPlan p = plan_memory(c, 4, rc, false, Precision::fp32, *be);
    EXPECT_EQ(p.total(), m.memory().total());
    EXPECT_LT(p.activations_bytes, prev) << to_string(rc);
    prev = p.activations_bytes;
  }
}

TEST(Model, GradientsAreBitwiseEqualUnderEveryRecomputePolicy) {
  GT_NEEDS_CPU_BACKEND();
  std::vector<int32_t> in(4 * 8), tg(4 * 8);
  for (size_t i = 0; i < in.size(); ++i) in[i] = (i * 7) % 10, tg[i] = (i * 3 + 1) % 10;
  // 32 wide: the products' K is a multiple of 32, so on a CPU with AMX the bf16 products run on
  // the own kernel (cpu/amx_matmul.h; 16 wide, they stay on oneDNN)
  for (const GPTConfig& c : {GPTConfig{3, 2, 16, 8, 10}, GPTConfig{2, 2, 32, 8, 10}})
    for (Precision p : {Precision::fp32, Precision::bf16})
      for (bool fused : {false, true}) {
        auto be = make_backend("cpu");
        be->set_precision(p);
        std::vector<float> ref;
        float ref_loss = 0;
        for (auto rc : {Recompute::none, Recompute::gelu, Recompute::gelu_ln, Recompute::block}) {
          GPT m(c, 4, rc, *be, fused);
          m.init_weights(42);
          m.zero_grad();
          float loss = m.forward(in.data(), tg.data(), 4, 8);
          m.backward(1.0f / 32);
          auto g = copy_grads(m);
          const std::string what = std::to_string(c.n_embd) + " wide " + to_string(p) +
                                   (fused ? " fused " : " ") + to_string(rc);
          if (ref.empty()) {
            ref = g;
            ref_loss = loss;
          } else {
            EXPECT_EQ(loss, ref_loss) << what;
            ASSERT_EQ(0, std::memcmp(g.data(), ref.data(), g.size() * sizeof(float))) << what;
          }
        }
      }
}

// Data-parallel training reduces each group's gradients when the hook says they are final:
// the hook must name grad_groups() in order, each once, covering every parameter, and a group's
// gradients must not change after its call.
TEST(Model, GradReadyHookNamesEveryGroupOnceWhenItsGradientsAreFinal) {
  GT_NEEDS_CPU_BACKEND();
  GPTConfig c{3, 2, 16, 8, 10};
  std::vector<int32_t> in(4 * 8), tg(4 * 8);
  for (size_t i = 0; i < in.size(); ++i) in[i] = (i * 7) % 10, tg[i] = (i * 3 + 1) % 10;
  for (bool fused : {false, true})
    for (auto rc : {Recompute::none, Recompute::block}) {
      auto be = make_backend("cpu");
      GPT m(c, 4, rc, *be, fused);
      m.init_weights(7);
      m.zero_grad();
      m.forward(in.data(), tg.data(), 4, 8);
      std::vector<GPT::GradGroup> seen;
      std::vector<std::vector<float>> at_hook;
      m.set_grad_ready_hook([&](const GPT::GradGroup& gr) {
        seen.push_back(gr);
        at_hook.emplace_back(gr.begin, gr.end);
      });
      m.backward(1.0f / 32);
      const std::string what = std::string(fused ? "fused " : "") + to_string(rc);
      ASSERT_TRUE(seen == m.grad_groups()) << what;
      Arena& g = m.grads();
      std::vector<int> covered(m.specs().size(), 0);  // each tensor inside exactly one group
      for (size_t k = 0; k < seen.size(); ++k) {
        ASSERT_LT(seen[k].begin, seen[k].end) << what << ": group " << k;
        for (size_t i = 0; i < g.size(); ++i)
          if (g.at(i).f32() >= seen[k].begin && g.at(i).f32() + g.at(i).numel() <= seen[k].end)
            ++covered[i];
        ASSERT_EQ(0,
                  std::memcmp(at_hook[k].data(), seen[k].begin, at_hook[k].size() * sizeof(float)))
            << what << ": group " << k << " changed after its hook";
      }
      EXPECT_EQ(covered, std::vector<int>(m.specs().size(), 1)) << what;
      // half-blocks: ln_f, then the MLP and the attention half of each block, then embeddings
      EXPECT_EQ(seen.size(), 2u + 2 * c.n_layer) << what;
      // block 0's MLP half: its ln_2, c_fc and c_proj tensors, named by their views
      const LayerParams& g0 = m.grad_views().h[0];
      EXPECT_EQ(seen[seen.size() - 3].begin, g0.ln2_w) << what;
      EXPECT_EQ(seen[seen.size() - 3].end, g0.fcproj_b + c.n_embd) << what;
    }
}

// bf16 activation storage keeps the products' inputs as the bf16 values the products used
// anyway: the same loss and gradients bit for bit, in less memory. With fusion on the logits
// are bf16 too (the classifier's product writes them rounded, the fused loss its gradient in
// place, as PyTorch autocast and llm.c keep them): the loss and the gradients then move by the
// logits' rounding alone, within bf16's tolerance, and the logits take half their memory.
TEST(Model, Bf16ActivationsAreBitwiseTheSameInHalfTheirMemory) {
  GT_NEEDS_CPU_BACKEND();
  GPTConfig c{3, 2, 16, 8, 10};
  const int B = 4, T = 8;
  std::vector<int32_t> in(B * T), tg(B * T);
  for (size_t i = 0; i < in.size(); ++i) in[i] = (i * 7) % 10, tg[i] = (i * 3 + 1) % 10;
  auto be = make_backend("cpu");
  be->set_precision(Precision::bf16);
  for (bool fused : {false, true})
    for (auto rc : {Recompute::none, Recompute::gelu_ln, Recompute::block}) {
      std::vector<float> g[2];
      float loss[2];
      size_t acts[2];
      for (int on = 0; on < 2; ++on) {
        GPT m(c, B, rc, *be, fused, on == 1);
        m.init_weights(42);
        m.zero_grad();
        loss[on] = m.forward(in.data(), tg.data(), B, T);
        m.backward(1.0f / (B * T));
        g[on] = copy_grads(m);
        acts[on] = m.memory().activations_bytes;
        if (on) {
          EXPECT_EQ(m.memory().total(), plan_memory(c, B, rc, fused, Precision::bf16, *be).total());
        }
      }
      const std::string what = std::string(fused ? "fused " : "") + to_string(rc);
      if (!fused) {
        EXPECT_EQ(loss[0], loss[1]) << what;
        ASSERT_EQ(0, std::memcmp(g[0].data(), g[1].data(), g[0].size() * sizeof(float))) << what;
      } else {  // bf16 logits: 8 significant bits (relative rounding error at most 2^-9)
        EXPECT_NEAR(loss[0], loss[1], 4e-3 * loss[0]) << what;
        EXPECT_NE(0, std::memcmp(g[0].data(), g[1].data(), g[0].size() * sizeof(float)))
            << what << ": the logits were not rounded";
        EXPECT_LT(test::rel_error(g[1], g[0]), 2e-2) << what;
      }
      // per stored layer ln1, atty, ln2 (N*C each) and the GELU output (N*4C), and ln_f: 2
      // bytes less per element; recomputed tensors share one buffer across the layers. With
      // fusion on, qkv (N*3C) too where the fused attention reads it in bf16 (Backend::bf16_qkv:
      // the CPU backend on CPUs with bf16 products): stored per layer but under recompute block
      const size_t NC = (size_t)B * T * c.n_embd;
      const size_t qkv = fused && be->bf16_qkv(c.n_embd, c.n_head) ? 3 * NC : 0;
      const size_t per_layer = (rc == Recompute::none      ? 7 * NC
                                : rc == Recompute::gelu_ln ? NC
                                                           : 0) +
                               (rc == Recompute::block ? 0 : qkv);
      const size_t shared = (rc == Recompute::none      ? 0
                             : rc == Recompute::gelu_ln ? 6 * NC
                                                        : 7 * NC) +
                            (rc == Recompute::block ? qkv : 0);
      const size_t logits = fused ? (size_t)B * T * c.vocab_size : 0;
      EXPECT_EQ(acts[0] - acts[1], 2 * (c.n_layer * per_layer + shared + NC + logits)) << what;
    }
}

TEST(Model, InitialLossIsLogVocabulary) {
  GT_NEEDS_CPU_BACKEND();
  GPTConfig c{2, 2, 32, 16, 50};
  auto be = make_backend("cpu");
  GPT m(c, 2, Recompute::none, *be);
  m.init_weights(1);
  std::vector<int32_t> in(32), tg(32);
  for (int i = 0; i < 32; ++i) in[i] = i % 50, tg[i] = (i * 13) % 50;
  float loss = m.forward(in.data(), tg.data(), 2, 16);
  EXPECT_NEAR(loss, std::log(50.0), 0.1);
}

TEST(Model, OverfitsOneBatch) {
  GT_NEEDS_CPU_BACKEND();
  GPTConfig c{2, 2, 32, 16, 20};
  auto be = make_backend("cpu");
  GPT m(c, 2, Recompute::none, *be);
  m.init_weights(3);
  std::vector<int32_t> in(32), tg(32);
  std::mt19937 g(5);
  for (int i = 0; i < 32; ++i) in[i] = g() % 20, tg[i] = g() % 20;
  Arena mm("m"), vv("v");
  for (auto& s : m.specs()) mm.plan(s.name, s.shape), vv.plan(s.name, s.shape);
  mm.allocate(*be);
  vv.allocate(*be);
  float loss = 0;
  for (int step = 1; step <= 300; ++step) {
    m.zero_grad();
    loss = m.forward(in.data(), tg.data(), 2, 16);
    m.backward(1.0f / 32);
    for (size_t i = 0; i < m.specs().size(); ++i)
      be->adamw_update(m.params().at(i).f32(), m.grads().at(i).f32(), mm.at(i).f32(),
                       vv.at(i).f32(), m.params().at(i).numel(), 3e-3f, 0.9f, 0.99f, 1e-8f, 0.0f,
                       step);
  }
  EXPECT_LT(loss, 0.1f);
}

TEST(Schedule, WarmupThenCosineToMinimum) {
  TrainConfig c;
  c.learning_rate = 1e-3;
  c.min_lr = 1e-4;
  c.warmup_steps = 10;
  c.max_steps = 110;
  EXPECT_NEAR(learning_rate_at(c, 0), 1e-3 / 11, 1e-12);
  EXPECT_NEAR(learning_rate_at(c, 10), 1e-3, 1e-12);
  EXPECT_NEAR(learning_rate_at(c, 60), 5.5e-4, 1e-12);
  EXPECT_NEAR(learning_rate_at(c, 110), 1e-4, 1e-12);
  EXPECT_NEAR(learning_rate_at(c, 500), 1e-4, 1e-12);
}

TEST(Training, LossFallsOnText) {
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(20000));
  TrainConfig c = tiny_config(d.file("t.txt"));
  c.max_steps = 60;
  Trainer tr(c, d.file("run"), false, nullptr);
  RunResult r = tr.run();
  ASSERT_EQ(r.losses.size(), 60u);
  EXPECT_LT(r.losses.back(), r.losses.front() - 0.5);
  ASSERT_TRUE(r.val_loss.has_value());
}

void expect_resume_bitwise(const std::string& text, int stop_at, int total,
                           const std::string& precision = "fp32", bool stochastic = false) {
  test::TempDir d;
  test::write_file(d.file("t.txt"), text);
  TrainConfig c = tiny_config(d.file("t.txt"));
  c.max_steps = total;
  c.precision = parse_precision(precision);
  c.stochastic_rounding = stochastic;
  std::vector<double> full;
  {
    Trainer tr(c, d.file("full"), false, nullptr);
    full = tr.run().losses;
  }
  std::vector<double> resumed;
  {
    Trainer tr(c, d.file("split"), false, nullptr);
    RunResult r = tr.run(stop_at);
    resumed = r.losses;
    ASSERT_EQ(r.step, stop_at);
  }
  {
    // resume the way the CLI does: configuration from the checkpoint
    CheckpointState st = load_checkpoint_state(d.file("split"));
    TrainConfig c2;
    load_config_string(st.config_toml, "state.json", c2);
    Trainer tr(c2, d.file("split"), true, nullptr);
    ASSERT_EQ(tr.step(), stop_at);
    auto rest = tr.run().losses;
    resumed.insert(resumed.end(), rest.begin(), rest.end());
  }
  ASSERT_EQ(full.size(), resumed.size());
  for (size_t i = 0; i < full.size(); ++i)
    ASSERT_EQ(full[i], resumed[i]) << "step " << i + 1 << " differs after resume";
}

TEST(Resume, TwentyStepsEqualTenSaveResumeTen) {
  expect_resume_bitwise(test::sample_text(20000), 10, 20);
}

// bf16 with stochastic rounding of the weight copies: the random bits are a function of
// (seed, step, tensor, element), so a resumed run rounds exactly as the uninterrupted one.
TEST(Resume, Bf16WithStochasticRoundingResumesBitwise) {
  GT_NEEDS_CPU_BACKEND();
  expect_resume_bitwise(test::sample_text(20000), 5, 10, "bf16", true);
}

TEST(Resume, SaveExactlyAtTheEndOfTheData) {
  // 9 tokens with block_size 8 make one window per epoch, so every step of batch 4 ends
  // exactly at the end of the data: the checkpoint's cursor sits at the end of its epoch.
  std::string text = "abcdefghi";
  {
    test::TempDir d;
    test::write_file(d.file("t.txt"), text);
    TrainConfig c = tiny_config(d.file("t.txt"));
    c.val_fraction = 0;
    c.max_steps = 6;
    Trainer tr(c, d.file("run"), false, nullptr);
    tr.run(3);
    CheckpointState st = load_checkpoint_state(d.file("run"));
    EXPECT_EQ(st.data_cursor, 1);  // one window per epoch, all of it used
  }
  // and a longer text where a save falls at an epoch boundary for some stops
  for (int stop : {1, 2, 3}) expect_resume_bitwise(text, stop, 6);
}

TEST(Eval, ValidationLossAfterTrainingEqualsEvalOfCheckpoint) {
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(20000));
  TrainConfig c = tiny_config(d.file("t.txt"));
  c.max_steps = 7;
  double val;
  {
    Trainer tr(c, d.file("run"), false, nullptr);
    RunResult r = tr.run();
    ASSERT_TRUE(r.val_loss);
    val = *r.val_loss;
  }
  LoadedModel lm = load_model(d.file("run"));
  TokenData data = load_data(lm.cfg, &lm.tokenizer);
  double again = evaluate_loss(*lm.model, data.val, lm.cfg.batch_size, lm.cfg.model.block_size,
                               lm.cfg.eval_steps);
  EXPECT_EQ(val, again);
}

}  // namespace
}  // namespace gt
