// train.device: the reference backend trains through the greentrain program and follows the
// CPU backend within float32 rounding; devices this build lacks, and precisions a backend
// cannot run, are refused before the first step with a message naming the key and value.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/error.h"
#include "test_helpers.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using test::run_cmd;

const std::string kBin = GT_BINARY;

struct Device : ::testing::Test {
  test::TempDir d;
  std::string cfg;
  void SetUp() override {
    test::write_file(d.file("t.txt"), test::sample_text(5000));
    cfg = d.file("tiny.toml");
    test::write_file(cfg,
                     "[model]\nn_layer = 2\nn_head = 2\nn_embd = 24\nblock_size = 12\n"
                     "[train]\nbatch_size = 3\nmax_steps = 8\nwarmup_steps = 2\n"
                     "eval_interval = 0\neval_steps = 2\ncheckpoint_interval = 0\nthreads = 2\n"
                     "[data]\npath = \"" +
                         d.file("t.txt") + "\"\n");
  }
  /// The per-step losses of `greentrain train` with extra arguments.
  std::vector<double> train_losses(const std::string& args, const std::string& name) {
    auto r = run_cmd(kBin + " train " + cfg + " " + args + " --out " + d.file(name));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::vector<double> losses;
    std::ifstream f(d.file(name) + "/metrics.jsonl");
    std::string line;
    while (std::getline(f, line)) losses.push_back(nlohmann::json::parse(line)["loss"]);
    return losses;
  }
  void expect_error(const std::string& args, const std::string& needle) {
    auto r = run_cmd(kBin + " train " + cfg + " " + args + " --out " + d.file("bad"));
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << "message was: " << r.output;
    EXPECT_FALSE(fs::exists(d.file("bad") + "/checkpoint"));
  }
};

// fusion off and on: the reference backend defines both forms
TEST_F(Device, RefTrainsAndFollowsCpuWithinFloat32Rounding) {
  GT_NEEDS_CPU_BACKEND();
  for (const char* fusion : {"off", "on"}) {
    const std::string f = std::string(" --set train.fusion=") + fusion;
    auto cpu = train_losses("--set train.device=cpu" + f, std::string("cpu-") + fusion);
    auto ref = train_losses("--set train.device=ref" + f, std::string("ref-") + fusion);
    ASSERT_EQ(cpu.size(), 8u);
    ASSERT_EQ(ref.size(), cpu.size());
    EXPECT_LT(cpu.back(), cpu.front());  // it learns
    for (size_t i = 0; i < cpu.size(); ++i)
      EXPECT_NEAR(ref[i], cpu[i], 2e-5 * cpu[i]) << "step " << i + 1 << " fusion " << fusion;
  }
  // the ref backend's memory is not host-readable: checkpoints are saved and loaded through
  // staged copies, as on a GPU; the same weights give the same validation loss
  auto e_cpu = run_cmd(kBin + " eval " + d.file("cpu-off"));
  auto e_ref = run_cmd(kBin + " eval " + d.file("ref-off"));
  ASSERT_EQ(e_ref.exit_code, 0) << e_ref.output;
  auto loss = [](const std::string& out) {
    auto at = out.find("loss ");
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 5));
  };
  EXPECT_GT(loss(e_cpu.output), 0) << e_cpu.output;
  EXPECT_NEAR(loss(e_ref.output), loss(e_cpu.output), 1e-3) << e_ref.output;
  auto s = run_cmd(kBin + " sample " + d.file("ref-off") + " --tokens 5 --prompt 'the '");
  EXPECT_EQ(s.exit_code, 0) << s.output;
}

TEST_F(Device, MissingDevicesAndUnsupportedPrecisionsAreRefused) {
  GT_NEEDS_CPU_BACKEND();
  expect_error("--set train.device=cuda", "train.device = 'cuda': this build has no CUDA backend");
  expect_error("--set train.device=cuda:1", "this build has no CUDA backend");
  expect_error("--set train.device=tpu", "train.device = 'tpu' is unknown; expected ref, cpu");
  expect_error("--set train.device=cpu:x", "device index 'x'");
  expect_error("--set train.device=ref --set train.precision=bf16", "ref backend");
}

TEST(Registry, EveryBackendSaysWhatItSupports) {
  GT_NEEDS_CPU_BACKEND();
  ASSERT_GE(registered_backends().size(), 2u);
  EXPECT_STREQ(registered_backends()[0].name, "ref");
  auto ref = make_backend("ref");
  EXPECT_TRUE(ref->supports(Op::matmul_forward, Precision::fp32));
  EXPECT_FALSE(ref->supports(Op::matmul_forward, Precision::bf16));
  try {
    check_supports(*ref, {Op::layernorm_forward, Op::attention_forward}, Precision::bf16);
    ADD_FAILURE() << "bf16 accepted by ref";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("ref backend has no layernorm_forward under precision bf16"),
        std::string::npos)
        << e.what();
  }
  auto cpu = make_backend("cpu");
  EXPECT_FALSE(cpu->supports(Op::matmul_forward, Precision::fp8));
  EXPECT_EQ(ref->workspace_bytes({}), 0u);
}

// GT_ONEDNN=OFF (GPU nodes without oneDNN): no cpu backend, so a configuration that names no
// device trains on ref, and train.device = cpu is refused with the reason. With oneDNN the
// default stays cpu.
TEST(Registry, TheDefaultDeviceIsOneThisBuildHas) {
  const bool cpu = test::has_backend("cpu");
  EXPECT_STREQ(default_device(), cpu ? "cpu" : "ref");
  EXPECT_EQ(TrainConfig{}.device, default_device());
  EXPECT_NO_THROW(make_backend(TrainConfig{}.device));
  if (cpu) return;
  try {
    make_backend("cpu");
    ADD_FAILURE() << "cpu accepted by a build without the cpu backend";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.device = 'cpu': this build has no cpu backend "
                                         "(it was configured with GT_ONEDNN=OFF"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gt
