// The classifier in bf16 (fusion on, bf16 activations): the product writes the logits in bf16,
// the fused softmax cross-entropy reads them and writes their gradient in place in bf16, and
// scale() takes the bf16 gradient; on the CPU backend and on the CUDA backend's own kernels
// (cuda-emu, the SIMT runtime), against float64 references computed from the same bf16 values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/backend.h"
#include "test_helpers.h"

namespace gt {
namespace {

float widen(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
float round_bf16(float f) {  // nearest even (no NaN here)
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return widen(uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16));
}

std::vector<float> normal(int64_t n, unsigned seed, float sd = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

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
    const auto inp = normal(N * C, 1), w = normal(int64_t(V) * C, 2, 0.3f);
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

INSTANTIATE_TEST_SUITE_P(Backends, Bf16Classifier, ::testing::Values("cpu", "cuda-emu"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace gt
