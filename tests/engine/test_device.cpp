// train.device: the reference backend trains through the greentrain program and follows the
// CPU backend within float32 rounding; devices this build lacks, and precisions a backend
// cannot run, are refused before the first step with a message naming the key and value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "test_helpers.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using test::run_cmd;

/// The greentrain program: GT_BINARY from the environment where set (bench/gpu-check.sh runs
/// the prepared binaries, which are not where this build put them), else this build's.
const std::string kBin = [] {
  const char* e = std::getenv("GT_BINARY");
  return std::string(e && *e ? e : GT_BINARY);
}();

struct Device : ::testing::Test {
  test::TempDir d;
  std::string cfg;
  void SetUp() override {
    cfg = test::write_tiny_config(
        d, {.n_embd = 24, .block_size = 12, .batch_size = 3, .max_steps = 8, .warmup_steps = 2});
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

/// The CUDA backend's code trained on `device` (cuda-emu: on the CPU; cuda: on a GPU) against
/// the CPU backend: fp32 with fusion off and on within float32 rounding, bf16 (fused; the GELU
/// recomputed, and not: then the CUDA code saves the GELU's input, the CPU gelu') within
/// bf16's; and a run stopped at step 4 and resumed equals the straight run
/// bit for bit (deterministic kernels, the 16-bit weight copies remade after loading).
void cuda_backend_trains_like_the_cpu(Device& t, const std::string& device) {
  struct Case {
    const char* args;
    double rel;
  };
  int n = 0;
  for (const Case& c : {Case{"--set train.fusion=off", 2e-5}, Case{"--set train.fusion=on", 2e-5},
                        Case{"--set train.precision=bf16 --set train.fusion=on "
                             "--set train.recompute=gelu",
                             1e-2},
                        Case{"--set train.precision=bf16 --set train.fusion=on "
                             "--set train.recompute=none",
                             1e-2}}) {
    const std::string tag = std::to_string(n++);
    // the CPU backend, or (a build without oneDNN, as on GPU nodes) the reference in fp32
    std::string base =
        test::has_backend("cpu") ? "--set train.device=cpu " : "--set train.device=ref ";
    std::string base_args = c.args;
    if (!test::has_backend("cpu")) {
      if (auto at = base_args.find("--set train.precision=bf16"); at != std::string::npos)
        base_args.erase(at, std::string("--set train.precision=bf16").size());
    }
    auto cpu = t.train_losses(base + base_args, "cpu" + tag);
    auto gpu = t.train_losses("--set train.device=" + device + " " + c.args, device + tag);
    ASSERT_EQ(cpu.size(), 8u);
    ASSERT_EQ(gpu.size(), cpu.size()) << c.args;
    for (size_t i = 0; i < cpu.size(); ++i)
      EXPECT_NEAR(gpu[i], cpu[i], c.rel * cpu[i]) << device << " step " << i + 1 << " " << c.args;
  }
  const std::string args = "--set train.device=" + device + " --set train.precision=bf16";
  auto straight = t.train_losses(args, "straight");
  auto r = run_cmd(kBin + " train " + t.cfg + " " + args + " --out " + t.d.file("resumed") +
                   " --stop-at 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cmd(kBin + " train --out " + t.d.file("resumed") + " --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<double> resumed;
  std::ifstream f(t.d.file("resumed") + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) resumed.push_back(j["loss"]);
  }
  EXPECT_EQ(resumed, straight) << "resume on " << device << " is not bit-exact";
}

TEST_F(Device, CudaBackendCodeOnTheCpuTrainsLikeTheCpuBackend) {
  cuda_backend_trains_like_the_cpu(*this, "cuda-emu");
}

// fp8 (e4m3 forward, e5m2 gradients, delayed scaling) on sizes its products take (multiples
// of 16): 8 steps follow fp32 on the CPU within fp8's rounding and still learn.
void trains_in_fp8(Device& t, const std::string& device) {
  const std::string shape =
      "--set model.n_embd=32 --set model.block_size=16 --set train.batch_size=2 ";
  auto cpu = t.train_losses(
      shape + (test::has_backend("cpu") ? "--set train.device=cpu" : "--set train.device=ref"),
      "cpu-fp32");
  auto fp8 = t.train_losses(shape + "--set train.device=" + device + " --set train.precision=fp8",
                            "fp8-" + device);
  ASSERT_EQ(fp8.size(), cpu.size());
  EXPECT_LT(fp8.back(), fp8.front());
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_NEAR(fp8[i], cpu[i], 0.05 * cpu[i]) << device << " step " << i + 1;
}
TEST_F(Device, CudaBackendCodeOnTheCpuTrainsInFp8) {
  trains_in_fp8(*this, "cuda-emu");
  expect_error("--set train.precision=fp8", "train.precision = 'fp8' needs train.device = cuda");
}

// The fp8 products of the CUDA backend (device memory through copies) against the reference:
// large inputs (amax far above e4m3's 448, so only the scaling keeps them), errors of fp8's
// size: above bf16's (the fp8 path ran) and below 12 %; the tied LM head's form (w
// transposed) runs in bf16.
void fp8_products_follow_fp32(Backend& be) {
  auto ref = make_backend("ref");
  be.set_precision(Precision::fp8);
  const int64_t N = 32;
  const int C = 48, OC = 64;
  test::DeviceVectors dv(be);
  auto up = [&](const std::vector<float>& h) { return dv.up(h); };
  auto down = [&](const float* p, size_t n) { return dv.down(p, n); };
  for (bool wt : {false, true}) {
    auto x = test::randn(N * C, 1), w = test::randn(C * OC, 2), b = test::randn(OC, 3);
    auto d = test::randn(N * OC, 4);
    for (auto& v : x) v *= 1000.0f;
    for (auto& v : d) v *= 1e-4f;
    float *xd = up(x), *wd = up(w), *bd = up(b), *dd = up(d);
    be.weights_updated();  // new weights (perhaps at the last loop's addresses)
    std::vector<float> o_r(N * OC);
    float* o = up(o_r);
    be.matmul_forward(o, xd, wd, bd, N, C, OC, wt);
    ref->matmul_forward(o_r.data(), x.data(), w.data(), b.data(), N, C, OC, wt);
    if (wt)  // the tied LM head's form stays bf16 under fp8 (as Transformer Engine's head)
      EXPECT_LT(test::rel_error(down(o, N * OC), o_r), 1e-2) << "wt: bf16";
    else
      EXPECT_GT(test::rel_error(down(o, N * OC), o_r), 5e-3) << "fp8's error, above bf16's";
    EXPECT_LT(test::rel_error(down(o, N * OC), o_r), 0.12) << "wt " << wt;
    std::vector<float> di_r(N * C), dw_r(C * OC, 0.f), db_r(OC, 0.f);
    float *di = up(di_r), *dw = up(dw_r), *db = up(db_r);
    be.matmul_backward(di, dw, db, dd, xd, wd, N, C, OC, wt);
    ref->matmul_backward(di_r.data(), dw_r.data(), db_r.data(), d.data(), x.data(), w.data(), N, C,
                         OC, wt);
    EXPECT_LT(test::rel_error(down(di, N * C), di_r), 0.12) << "dinp wt " << wt;
    EXPECT_LT(test::rel_error(down(dw, C * OC), dw_r), 0.12) << "dw wt " << wt;
    EXPECT_LT(test::rel_error(down(db, OC), db_r), 1e-5) << "dbias (f32 sums)";
  }
}
TEST(Fp8, ProductsOfTheCudaBackendCodeFollowFp32) {
  fp8_products_follow_fp32(*make_backend("cuda-emu"));
}
#ifdef GT_HAVE_CUDA
TEST(Fp8, ProductsOnAGpuFollowFp32) {
  std::string why;
  if (cuda_device_count(&why) == 0) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  auto be = make_backend("cuda");
  if (!be->supports(Op::matmul_forward, Precision::fp8))
    GTEST_SKIP() << "skipped: " << be->name() << " has no fp8 products (compute capability < 8.9)";
  fp8_products_follow_fp32(*be);
}

TEST_F(Device, CudaBackendOnAGpuTrainsLikeTheCpuBackend) {
  std::string why;
  if (cuda_device_count(&why) == 0) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  cuda_backend_trains_like_the_cpu(*this, "cuda");
  if (make_backend("cuda")->supports(Op::matmul_forward, Precision::fp8))
    trains_in_fp8(*this, "cuda");
}
#endif

TEST_F(Device, MissingDevicesAndUnsupportedPrecisionsAreRefused) {
  GT_NEEDS_CPU_BACKEND();
#ifdef GT_HAVE_CUDA
  if (cuda_device_count() == 0) {
    expect_error("--set train.device=cuda", "train.device = 'cuda:0': no CUDA device");
    expect_error("--set train.device=cuda:1", "train.device = 'cuda:1': no CUDA device");
  }
  expect_error("--set train.device=cuda:99", "cuda:99");
#else
  expect_error("--set train.device=cuda", "train.device = 'cuda': this build has no CUDA backend");
  expect_error("--set train.device=cuda:1", "this build has no CUDA backend");
#endif
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

// One parser of train.device serves the registry, the energy meter (which GPU to read) and the
// NCCL communicator (which device): an emulated CUDA device is no GPU to read.
TEST(Registry, DeviceNamesSplitIntoBackendAndIndex) {
  EXPECT_EQ(parse_device("cuda:3").name, "cuda");
  EXPECT_EQ(parse_device("cuda:3").index, 3);
  EXPECT_TRUE(parse_device("cuda").gpu_energy());
  EXPECT_EQ(parse_device("cuda").index, 0);
  EXPECT_FALSE(parse_device("cuda-emu").gpu_energy());
  EXPECT_FALSE(parse_device("cpu").gpu_energy());
  for (const char* bad : {"cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda:99999"}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("train.device = '") + bad + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

// The registry's traits are all the program knows of a device: which names take an index,
// which one a rank of a node takes, what fp8 and cuDNN need, and why a build lacks one. The
// registry knows "cuda" in every build (a build without it says how to get it).
TEST(Registry, DeviceTraitsDriveWhatTheProgramDoes) {
  // one device per rank of a node: an unindexed "cuda" only
  EXPECT_EQ(device_for_local_rank("cuda", 3), "cuda:3");
  EXPECT_EQ(device_for_local_rank("cuda:1", 3), "cuda:1");
  EXPECT_EQ(device_for_local_rank("cpu", 3), "cpu");
  EXPECT_EQ(device_for_local_rank("cuda-emu", 3), "cuda-emu");
  EXPECT_TRUE(device_traits("cuda:2").cudnn);
  EXPECT_FALSE(device_traits("cuda-emu").cudnn);
  EXPECT_FALSE(device_traits("tpu").indexed);
  EXPECT_EQ(find_backend("tpu"), nullptr);
  EXPECT_EQ(devices_with([](const DeviceTraits& t) { return t.cudnn; }), "cuda or cuda:N");

  const auto error_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const auto validated = [&](const char* device, Precision p, const char* attention) {
    TrainConfig c;
    c.device = device;
    c.precision = p;
    c.attention = attention;
    c.fusion = true;  // cudnn replaces the fused attention
    return error_of([&] { c.validate(); });
  };
  EXPECT_NE(validated("cpu", Precision::fp8, "own")
                .find("train.precision = 'fp8' needs train.device = cuda (an Ada or Hopper "
                      "GPU) or cuda-emu"),
            std::string::npos);
  EXPECT_EQ(validated("cuda-emu", Precision::fp8, "own"), "");
  EXPECT_EQ(validated("cuda:1", Precision::fp8, "own"), "");
  EXPECT_NE(validated("cuda-emu", Precision::bf16, "cudnn")
                .find("needs train.device = cuda or cuda:N, not 'cuda-emu'"),
            std::string::npos);
  EXPECT_EQ(validated("cuda:1", Precision::bf16, "cudnn"), "");
  EXPECT_NE(validated("", Precision::fp32, "own").find("expected ref, cpu, cuda or cuda:N"),
            std::string::npos);

  // an index only where the traits allow one
  EXPECT_NE(error_of([] { make_backend("ref:1"); }).find("ref has no device index"),
            std::string::npos);
  const BackendEntry* cuda = find_backend("cuda");
  ASSERT_NE(cuda, nullptr);
  ASSERT_NE(cuda->traits.missing_hint, nullptr);
  if (!cuda->make) {  // a build without the CUDA backend
    const std::string e = error_of([] { make_backend("cuda:1"); });
    EXPECT_NE(e.find("train.device = 'cuda:1': this build has no CUDA backend"), std::string::npos)
        << e;
    EXPECT_NE(e.find(cuda->traits.missing_hint), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace gt
