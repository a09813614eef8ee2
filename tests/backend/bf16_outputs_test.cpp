// Products that write bf16 under bf16 activations with fusion on. The classifier: the product
// writes the logits in bf16, the fused softmax cross-entropy reads them and writes their
// gradient in place in bf16, and scale() takes the bf16 gradient; on the CPU backend and on the
// CUDA backend's own kernels (cuda-emu, the SIMT runtime), against float64 references computed
// from the same bf16 values. qkv: the fused attention of both reads a bf16 qkv in place, with
// the results of the f32 qkv it rounds as it loads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "op_harness.h"    // test::normal
#include "test_helpers.h"  // test::has_backend, test::DeviceVectors (tests/engine)

namespace gt {
namespace {

float widen(uint16_t h) { return bf16_to_float(h); }
float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }  // nearest even

class Bf16Classifier : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16Classifier, LogitsTheirGradientAndScaleFollowAFloat64Reference) {
  if (!test::has_backend(GetParam())) GTEST_SKIP() << GetParam() << " is not in this build";
  auto be = make_backend(GetParam());
  be->set_precision(Precision::bf16);
  const int64_t N = 6;
  const int C = 32;
  const float dloss = 0.25f;
  // V a multiple of 8 (the kernels' 16-byte packs of bf16) and not
  for (const int V : {72, 70}) {
    SCOPED_TRACE("V = " + std::to_string(V));
    const auto inp = test::normal(N * C, 1), w = test::normal(int64_t(V) * C, 2, 0.3f);
    std::vector<int32_t> tg(N);
    for (int64_t i = 0; i < N; ++i) tg[i] = int32_t((i * 37 + 5) % V);
    test::DeviceVectors dv(*be);
    float* d_inp = dv.up(inp);
    float* d_w = dv.up(w);
    float* d_loss = dv.up(std::vector<float>(N, NAN));
    auto* d_tg = static_cast<int32_t*>(be->allocate(N * sizeof(int32_t)));
    be->copy_to_device(d_tg, tg.data(), N * sizeof(int32_t));
    be->host_tokens(d_tg, tg.data(), N);
    // the logits' buffer: bf16 (half of a float buffer of N*V)
    float* d_l = dv.up(std::vector<float>(N * V / 2 + 1, NAN));
    const DevPtr logits(d_l, DType::bf16);
    auto down16 = [&] {
      std::vector<uint16_t> h(N * V);
      be->copy_to_host(h.data(), d_l, h.size() * sizeof(uint16_t));
      std::vector<float> f(h.size());
      for (size_t i = 0; i < h.size(); ++i) f[i] = widen(h[i]);
      return f;
    };

    // logits (N, V) = inp @ w^T of the bf16-rounded operands, accumulated in f32, rounded once
    be->matmul_forward(logits, d_inp, d_w, nullptr, N, C, V, /*w_transposed=*/true);
    const std::vector<float> l = down16();
    for (int64_t i = 0; i < N; ++i)
      for (int v = 0; v < V; ++v) {
        double s = 0;
        for (int c = 0; c < C; ++c)
          s += double(round_bf16(inp[i * C + c])) * round_bf16(w[int64_t(v) * C + c]);
        const float got = l[i * V + v];
        ASSERT_EQ(got, round_bf16(got));
        // one bf16 rounding (2^-9 relative) of an f32 sum
        ASSERT_NEAR(got, s, std::fabs(s) * 0x1p-8 + 1e-5) << "logit " << i << ", " << v;
      }

    // the fused loss: losses from the bf16 logits, their gradient written back in bf16
    be->softmax_crossentropy_fused(logits, d_loss, d_tg, dloss, N, V);
    const std::vector<float> loss = dv.down(d_loss, N), g = down16();
    for (int64_t i = 0; i < N; ++i) {
      double mx = -INFINITY, sum = 0;
      for (int v = 0; v < V; ++v) mx = std::max(mx, double(l[i * V + v]));
      for (int v = 0; v < V; ++v) sum += std::exp(double(l[i * V + v]) - mx);
      const double lse = mx + std::log(sum);
      EXPECT_NEAR(loss[i], lse - l[i * V + tg[i]], 1e-5 * lse) << "row " << i;
      for (int v = 0; v < V; ++v) {
        const double ref = (std::exp(l[i * V + v] - lse) - (v == tg[i] ? 1.0 : 0.0)) * dloss;
        const float got = g[i * V + v];
        ASSERT_NEAR(got, ref, std::fabs(ref) * 0x1p-8 + 1e-7) << "dlogit " << i << ", " << v;
      }
    }

    // scale(): by a power of two exactly; by 3 rounded to nearest even again
    be->scale(logits, 0.5f, N * V);
    const std::vector<float> half = down16();
    for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(half[i], g[i] * 0.5f) << i;
    be->scale(logits, 3.0f, N * V);
    const std::vector<float> three = down16();
    for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(three[i], round_bf16(half[i] * 3.0f)) << i;
    be->deallocate(d_tg);
  }
}

// The fused attention on a bf16 qkv: bitwise the output, the log-sum-exp and dqkv of the f32
// qkv whose bf16 rounding it is. cuda-emu: the flash kernels round f32 Q, K, V as they load
// them; at a head size they do not take (48) the bf16 qkv is widened and gives the results of
// its widened values. cpu: its own kernels and oneDNN's products (at T 70 on a CPU with AMX,
// head sizes 64 and 128 run oneDNN's, 32 and 48 the own kernels; 8 always oneDNN's) round q, k,
// v to bf16 as they pack them; where the CPU has no bf16 products it takes no bf16 qkv.
class Bf16Qkv : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16Qkv, FusedAttentionReadsItInPlaceWithTheResultsOfTheRoundedF32) {
  if (!test::has_backend(GetParam())) GTEST_SKIP() << GetParam() << " is not in this build";
  auto be = make_backend(GetParam());
  be->set_precision(Precision::bf16);
  const bool cpu = GetParam() == "cpu";
  if (cpu && !be->bf16_qkv(128, 2)) GTEST_SKIP() << "this CPU has no bf16 products";
  const int B = 2, T = 70;  // T not a multiple of the 64-row tiles
  std::vector<std::pair<int, int>> shapes = {{128, 2}, {128, 4}, {128, 1}, {96, 2}};
  if (cpu) shapes.push_back({16, 2});
  for (const auto& [C, NH] : shapes) {
    SCOPED_TRACE("C = " + std::to_string(C) + ", NH = " + std::to_string(NH));
    EXPECT_EQ(be->bf16_qkv(C, NH), cpu || C / NH != 48);
    const int64_t N = int64_t(B) * T, n3 = N * 3 * C;
    std::vector<float> qkv = test::normal(n3, 7, 0.8f), dout = test::normal(N * C, 8);
    std::vector<uint16_t> q16(n3);
    for (int64_t i = 0; i < n3; ++i) {
      q16[i] = float_to_bf16(qkv[i]);
      qkv[i] = bf16_to_float(q16[i]);  // so the widened fallback sees the same values
    }
    test::DeviceVectors dv(*be);
    float* d_q32 = dv.up(qkv);
    float* d_q16 = dv.up(std::vector<float>(n3 / 2 + 1));
    be->copy_to_device(d_q16, q16.data(), n3 * sizeof(uint16_t));
    float* d_dout = dv.up(dout);
    struct Result {
      std::vector<float> out, lse, dqkv;
    } r[2];
    for (int k = 0; k < 2; ++k) {
      float* out = dv.up(std::vector<float>(N * C / 2 + 1, NAN));
      float* lse = dv.up(std::vector<float>(int64_t(B) * NH * T, NAN));
      float* dq = dv.up(std::vector<float>(n3 / 2 + 1, NAN));
      const ConstDevPtr q = k ? ConstDevPtr(d_q16, DType::bf16) : ConstDevPtr(d_q32);
      be->attention_forward_fused(DevPtr(out, DType::bf16), lse, q, B, T, C, NH);
      be->attention_backward_fused(DevPtr(dq, DType::bf16), d_dout, q, DevPtr(out, DType::bf16),
                                   lse, B, T, C, NH);
      r[k].out = dv.down(out, N * C / 2);
      r[k].lse = dv.down(lse, int64_t(B) * NH * T);
      r[k].dqkv = dv.down(dq, n3 / 2);
    }
    for (const auto& [name, a, b] :
         {std::tuple{"out", &r[0].out, &r[1].out}, std::tuple{"lse", &r[0].lse, &r[1].lse},
          std::tuple{"dqkv", &r[0].dqkv, &r[1].dqkv}}) {
      ASSERT_EQ(a->size(), b->size());
      EXPECT_EQ(0, std::memcmp(a->data(), b->data(), a->size() * sizeof(float))) << name;
      bool finite = true;
      for (float x : *b) finite &= std::isfinite(x);
      EXPECT_TRUE(finite) << name;
    }
  }
}

std::string backend_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Backends, Bf16Classifier, ::testing::Values("cpu", "cuda-emu"),
                         backend_name);
INSTANTIATE_TEST_SUITE_P(Backends, Bf16Qkv, ::testing::Values("cpu", "cuda-emu"), backend_name);

}  // namespace
}  // namespace gt
