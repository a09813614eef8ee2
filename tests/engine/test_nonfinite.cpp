// Issue 15, part 1: non-finite values never reach a checkpoint. Configuration values are
// checked where they are read; at run time an inf or NaN loss, gradient, AdamW moment or
// parameter stops an fp32 or bf16 run at the step where it first appears (naming the step and
// the tensor, the last checkpoint left as it was), and fp16 skips the step instead.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "model/gpt.h"
#include "test_helpers.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/trainer.h"

namespace gt {
namespace {

namespace fs = std::filesystem;

TrainConfig tiny(const std::string& data_path) {
  return test::small_train_config(data_path, 16, 8, 10, 2);
}

std::string read_bytes(const fs::path& p) { return gt::read_file(p.string()); }

// The three files of a checkpoint, byte for byte.
std::vector<std::string> checkpoint_bytes(const std::string& run) {
  std::vector<std::string> out;
  for (auto f : {"model.safetensors", "optimizer.safetensors", "state.json"})
    out.push_back(read_bytes(fs::path(checkpoint_dir(run)) / f));
  return out;
}

// Sets every element of tensor i of arena `a` to x, through the backend.
void fill(Backend& be, Arena& a, size_t i, float x) {
  std::vector<float> host(a.at(i).numel(), x);
  be.upload(a.at(i), host.data());
}

std::vector<float> download(Backend& be, const Arena& a) {
  std::vector<float> host(a.bytes() / sizeof(float));
  be.copy_to_host(host.data(), a.base(), a.bytes());
  return host;
}

TEST(NonFinite, ConfigValuesBuiltInCodeAreCheckedToo) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    void (*set)(TrainConfig&, double);
    double value;
    const char* needle;
  };
  const Case cases[] = {
      {[](TrainConfig& c, double x) { c.learning_rate = x; }, 1e39, "train.learning_rate = 1e+39"},
      {[](TrainConfig& c, double x) { c.learning_rate = x; }, nan, "train.learning_rate = nan"},
      {[](TrainConfig& c, double x) { c.min_lr = x; }, inf, "train.min_lr = inf"},
      {[](TrainConfig& c, double x) { c.weight_decay = x; }, inf, "train.weight_decay = inf"},
      {[](TrainConfig& c, double x) { c.beta2 = x; }, 0.9999999999, "train.beta2 = 0.9999999999"},
      {[](TrainConfig& c, double x) { c.eps = x; }, 1e-50, "train.eps = 1e-50"},
      {[](TrainConfig& c, double x) { c.grad_clip = x; }, inf, "train.grad_clip = inf"},
      {[](TrainConfig& c, double x) { c.energy_interval_ms = x; }, inf, "energy.interval_ms = inf"},
      // issue 31 §6: durations that would wait forever (the meter spun at 100 % CPU)
      {[](TrainConfig& c, double x) { c.energy_interval_ms = x; }, 1e300,
       "energy.interval_ms = 1e+300"},
      {[](TrainConfig& c, double x) { c.dist_timeout_s = x; }, 1e300, "dist.timeout_s = 1e+300"},
      {[](TrainConfig& c, double x) { c.target_loss = x; }, nan, "train.target_loss = nan"},
  };
  for (const auto& k : cases) {
    TrainConfig c = tiny("x.txt");
    k.set(c, k.value);
    try {
      c.validate();
      ADD_FAILURE() << k.needle << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(k.needle), std::string::npos) << e.what();
    }
  }
}

// Issue 31 §6: every count has a range. train.threads took any count: -1 passed as "all cores"
// never checked further, and 2^31 - 1 made OpenMP start threads until the process died.
TEST(NonFinite, ThreadCountHasARange) {
  for (const char* bad : {"-1", "4097", "2147483647"}) {
    TrainConfig c = tiny("x.txt");
    c.set("train.threads", bad, "--set");
    try {
      c.validate();
      ADD_FAILURE() << "train.threads = " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("train.threads = ") + bad +
                                           ": expected 0 (all cores) to 4096 threads"),
                std::string::npos)
          << e.what();
    }
  }
  for (const char* good : {"0", "1", "4096"}) {
    TrainConfig c = tiny("x.txt");
    c.set("train.threads", good, "--set");
    EXPECT_NO_THROW(c.validate()) << "train.threads = " << good;
  }
}

// A 2-layer model (weights from seed 1) and AdamW moments shaped like its parameters, zeroed.
struct ModelWithMoments {
  GPT model;
  Arena m{"m"}, v{"v"};
  ModelWithMoments(Backend& be, bool fusion)
      : model(GPTConfig{2, 2, 16, 8, 20}, 2, Recompute::none, be, fusion) {
    model.init_weights(1);
    for (auto& s : model.specs()) {
      m.plan(s.name, s.shape);
      v.plan(s.name, s.shape);
    }
    m.allocate(be);
    v.allocate(be);
  }
};

// The unfused fp32 clipping path had no finiteness check on the gradient norm: a NaN gradient
// went into AdamW and every weight became NaN.
TEST(NonFinite, AGradientWithNaNChangesNothingOnEveryOptimizerPath) {
  GT_NEEDS_CPU_BACKEND();
  auto be = make_backend("cpu", {.threads = 2});
  for (bool fusion : {false, true}) {
    for (double loss_scale : {1.0, 1024.0}) {
      ModelWithMoments mm(*be, fusion);
      GPT& model = mm.model;
      Arena &m = mm.m, &v = mm.v;
      for (size_t i = 0; i < model.grads().size(); ++i) fill(*be, model.grads(), i, 0.01f);
      fill(*be, model.grads(), 4, std::numeric_limits<float>::quiet_NaN());
      TrainConfig cfg = tiny("x.txt");
      cfg.fusion = fusion;
      const auto before = download(*be, model.params());
      OptimizerResult r = optimizer_step(*be, model, m, v, cfg, 1e-3f, 1, loss_scale);
      EXPECT_TRUE(r.skipped) << "fusion " << fusion << ", loss scale " << loss_scale;
      EXPECT_EQ(r.nonfinite_tensor, model.specs()[4].name);
      EXPECT_EQ(download(*be, model.params()), before) << "weights changed";
      if (!fusion && loss_scale == 1.0) {
        try {
          clip_and_update(*be, model, m, v, cfg, 1e-3f, 1);
          ADD_FAILURE() << "clip_and_update accepted a NaN gradient";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("gradient of 'h.0.attn.c_attn.weight'"),
                    std::string::npos)
              << e.what();
        }
        EXPECT_EQ(download(*be, model.params()), before) << "weights changed";
      }
    }
  }
}

// The global gradient norm is the float64 norm over every tensor (summed in one pass over the
// arena's flat memory): not a part of the arena, and the padding between tensors adds nothing.
TEST(NonFinite, GradientNormIsTheNormOfEveryTensor) {
  GT_NEEDS_CPU_BACKEND();
  auto be = make_backend("cpu", {.threads = 2});
  ModelWithMoments mm(*be, true);
  GPT& model = mm.model;
  double sq = 0.0;
  for (size_t i = 0; i < model.grads().size(); ++i) {
    const float x = 0.001f * float(i + 1);  // every tensor its own value
    fill(*be, model.grads(), i, x);
    sq += double(x) * x * double(model.grads().at(i).numel());
  }
  TrainConfig cfg = tiny("x.txt");
  cfg.fusion = true;
  OptimizerResult r = optimizer_step(*be, model, mm.m, mm.v, cfg, 1e-3f, 1, 1.0);
  EXPECT_FALSE(r.skipped);
  EXPECT_NEAR(r.grad_norm, std::sqrt(sq), 1e-6 * std::sqrt(sq));
}

// fp32 and bf16: the run stops at the step where a value first becomes inf or NaN, naming
// the step and the tensor; the checkpoint on disk is the last good one, byte for byte.
// fused: train.fusion = on, whose step (one host synchronization) has the backend's
// adamw_step find inf/NaN in what AdamW wrote (the CPU backend as it writes them).
void expect_run_stops(Precision p, bool poison_moment, bool fused = false) {
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(8000));
  TrainConfig c = tiny(d.file("t.txt"));
  c.precision = p;
  c.fusion = fused;
  Trainer tr(c, d.file("run"), false, nullptr);
  tr.run(3);  // checkpoint at step 3
  const auto saved = checkpoint_bytes(d.file("run"));
  std::string needle;
  if (poison_moment) {  // a second moment that overflowed: the update must not go on
    fill(tr.backend(), tr.adam_v(), 0, std::numeric_limits<float>::infinity());
    needle = "step 4: AdamW's second moment (exp_avg_sq) of 'wte.weight'";
  } else {  // finite but huge embeddings: the LayerNorm overflows, the loss is NaN
    fill(tr.backend(), tr.model().params(), 0, 3e38f);
    tr.backend().weights_updated();
    needle = "step 4: the training loss of micro-batch 1 of 1 is";
  }
  try {
    tr.run();
    ADD_FAILURE() << "the run went on with inf/NaN (" << to_string(p) << ")";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checkpoint of step 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(checkpoint_bytes(d.file("run")), saved) << "the last good checkpoint changed";
  EXPECT_EQ(load_checkpoint_state(d.file("run")).step, 3);
}

TEST(NonFinite, Fp32RunStopsAtTheFirstNaNLoss) {
  GT_NEEDS_CPU_BACKEND();  // on ref, huge embeddings make a NaN gradient, not a NaN loss
  expect_run_stops(Precision::fp32, false);
}
TEST(NonFinite, Bf16RunStopsAtTheFirstNaNLoss) {
  GT_NEEDS_CPU_BACKEND();
  expect_run_stops(Precision::bf16, false);
}
TEST(NonFinite, Fp32RunStopsAtAnInfiniteMoment) { expect_run_stops(Precision::fp32, true); }
TEST(NonFinite, Bf16RunStopsAtAnInfiniteMoment) {
  GT_NEEDS_CPU_BACKEND();
  expect_run_stops(Precision::bf16, true);
}
TEST(NonFinite, FusedRunsStopAtAnInfiniteMoment) {
  expect_run_stops(Precision::fp32, true, true);
  if (default_device() == std::string("cpu")) expect_run_stops(Precision::bf16, true, true);
}

// fp16: an inf/NaN loss makes inf/NaN gradients and the loss scaler skips the step, as
// PyTorch's GradScaler does.
TEST(NonFinite, Fp16SkipsTheStepInstead) {
  GT_NEEDS_CPU_BACKEND();
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(8000));
  TrainConfig c = tiny(d.file("t.txt"));
  c.precision = Precision::fp16;
  Trainer tr(c, d.file("run"), false, nullptr);
  tr.run(2);
  fill(tr.backend(), tr.model().params(), 0, 3e38f);
  tr.backend().weights_updated();
  const auto before = download(tr.backend(), tr.model().params());
  const double scale = tr.scaler().scale();
  tr.train_step();
  EXPECT_TRUE(tr.last_step_skipped());
  EXPECT_EQ(tr.scaler().scale(), scale / 2);
  EXPECT_EQ(download(tr.backend(), tr.model().params()), before);
}

// Non-finite weights are never written, whoever calls save(), and never read back.
TEST(NonFinite, SaveRefusesAndLoadRefusesNaNWeights) {
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(8000));
  TrainConfig c = tiny(d.file("t.txt"));
  Trainer tr(c, d.file("run"), false, nullptr);
  tr.run(2);
  const auto saved = checkpoint_bytes(d.file("run"));
  const size_t last = tr.model().params().size() - 1;  // ln_f.bias
  fill(tr.backend(), tr.model().params(), last, std::numeric_limits<float>::quiet_NaN());
  try {
    tr.save();
    ADD_FAILURE() << "a NaN weight was saved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'ln_f.bias' holds nan"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(checkpoint_bytes(d.file("run")), saved);
  for (auto& e : fs::directory_iterator(d.file("run")))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  // a model.safetensors written elsewhere with a NaN in it is refused when read
  std::string bytes = saved[0];
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + bytes.size() - sizeof(float), &nan, sizeof(float));
  test::write_file((fs::path(checkpoint_dir(d.file("run"))) / "model.safetensors").string(), bytes);
  test::drop_checkpoint_checksums(d.file("run"));  // else refused as damaged before it is read
  try {
    load_model(d.file("run"));
    ADD_FAILURE() << "a NaN weight was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'ln_f.bias' holds nan"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gt
