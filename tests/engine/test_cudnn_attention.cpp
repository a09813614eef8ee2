// train.attention = cudnn: the configurations that cannot use cuDNN's fused attention are
// refused naming the key, the SIMT runtime says it has none, and on a GPU cuDNN's attention and
// the own flash kernels both follow the reference backend's f32 attention within bf16
// rounding (forward output, log-sum-exp, and the backward's dq, dk, dv).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "error_of.h"
#include "test_helpers.h"
#include "train/config.h"

namespace gt {
namespace {

using gt::test::error_of;

TEST(CudnnAttention, ConfigurationsThatCannotUseItAreRefused) {
  auto validate = [](const std::vector<std::string>& sets) {
    return error_of([&] {
      TrainConfig c;
      apply_overrides(sets, c);
      c.validate();
    });
  };
  const std::vector<std::string> ok = {"train.attention=cudnn", "train.device=cuda",
                                       "train.precision=bf16", "train.fusion=on"};
  EXPECT_EQ(validate(ok), "");
  auto with = [&](const std::string& set) {
    auto s = ok;
    s.push_back(set);
    return validate(s);
  };
  EXPECT_NE(with("train.attention=flash").find("train.attention = 'flash': expected own"),
            std::string::npos);
  EXPECT_NE(with("train.device=cpu").find("needs train.device = cuda or cuda:N, not 'cpu'"),
            std::string::npos);
  EXPECT_NE(with("train.device=cuda-emu").find("not 'cuda-emu'"), std::string::npos);
  EXPECT_EQ(with("train.device=cuda:1"), "");
  EXPECT_NE(with("train.precision=fp32").find("needs train.precision bf16, fp16 or fp8"),
            std::string::npos);
  EXPECT_EQ(with("train.precision=fp8"), "");
  EXPECT_NE(with("train.fusion=off").find("needs train.fusion = on"), std::string::npos);
  // own is the default and goes with every device
  TrainConfig c;
  EXPECT_EQ(c.attention, "own");
  EXPECT_EQ(backend_options(c).attention, AttentionImpl::own);
  apply_overrides(ok, c);
  EXPECT_EQ(backend_options(c).attention, AttentionImpl::cudnn);
  const std::string toml = c.to_toml();  // written into the run folder, read back on resume
  EXPECT_NE(toml.find("attention = 'cudnn'"), std::string::npos) << toml;
  TrainConfig back;
  load_config_string(toml, "config.toml", back);
  EXPECT_EQ(back.attention, "cudnn");
}

TEST(CudnnAttention, TheSimtRuntimeHasNone) {
  BackendOptions o;
  o.attention = AttentionImpl::cudnn;
  EXPECT_NE(error_of([&] { make_backend("cuda-emu", o); }).find("cuda-emu runs the own kernels"),
            std::string::npos);
  o.attention = AttentionImpl::own;
  EXPECT_EQ(error_of([&] { make_backend("cuda-emu", o); }), "");
}

#ifdef GT_HAVE_CUDA
/// Fused attention forward and backward of `be` (under bf16, f32 tensors) against ref's.
void follows_ref(Backend& be, int B, int T, int C, int NH) {
  auto ref = make_backend("ref");
  be.set_precision(Precision::bf16);
  const int64_t N = int64_t(B) * T;
  const auto qkv = test::randn(N * 3 * C, 11), dout = test::randn(N * C, 12);
  test::DeviceVectors dv(be);
  auto up = [&](const std::vector<float>& h) { return dv.up(h); };
  auto down = [&](const float* p, size_t n) { return dv.down(p, n); };
  std::vector<float> out_r(N * C), lse_r(int64_t(B) * NH * T), dqkv_r(N * 3 * C);
  ref->attention_forward_fused(out_r.data(), lse_r.data(), qkv.data(), B, T, C, NH);
  ref->attention_backward_fused(dqkv_r.data(), dout.data(), qkv.data(), out_r.data(), lse_r.data(),
                                B, T, C, NH);
  float *q = up(qkv), *d = up(dout), *o = up(out_r), *l = up(lse_r), *dq = up(dqkv_r);
  be.attention_forward_fused(o, l, q, B, T, C, NH);
  be.attention_backward_fused(dq, d, q, o, l, B, T, C, NH);
  const std::string at = be.name() + " B " + std::to_string(B) + " T " + std::to_string(T) + " C " +
                         std::to_string(C) + " NH " + std::to_string(NH);
  // bf16 operands (8 bits of mantissa): relative errors of a few 1e-3
  EXPECT_LT(test::rel_error(down(o, N * C), out_r), 2e-2) << "out, " << at;
  EXPECT_LT(test::rel_error(down(l, lse_r.size()), lse_r), 2e-3) << "lse, " << at;
  EXPECT_LT(test::rel_error(down(dq, N * 3 * C), dqkv_r), 3e-2) << "dqkv, " << at;
}

TEST(CudnnAttention, FollowsTheReferenceOnAGpuAsTheOwnKernelsDo) {
  std::string why;
  if (cuda_device_count(&why) == 0) GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  BackendOptions o;
  auto own = make_backend("cuda", o);
  o.attention = AttentionImpl::cudnn;
  std::unique_ptr<Backend> cudnn;
  try {
    cudnn = make_backend("cuda", o);
  } catch (const Error& e) {  // no cuDNN 9 on this machine: said, not failed
    if (std::string(e.what()).find("cannot load cuDNN 9") == std::string::npos) throw;
    GTEST_SKIP() << "skipped: " << e.what();
  }
  // T = 100: a last tile of keys and queries that is not full
  for (auto [B, T, C, NH] :
       {std::array{2, 128, 128, 2}, std::array{1, 100, 128, 2}, std::array{2, 256, 768, 12}}) {
    follows_ref(*own, B, T, C, NH);
    follows_ref(*cudnn, B, T, C, NH);
  }
}
#endif

}  // namespace
}  // namespace gt
