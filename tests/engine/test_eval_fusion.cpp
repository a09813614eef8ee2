// Forward-only passes (evaluation, sampling) with fusion on: c_fc and its GELU as one matrix
// product with a GELU post-op (Backend::matmul_gelu_forward), against a float64 reference,
// the two-pass form, and inside the model against the training forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/profiling.h"
#include "core/arena.h"
#include "core/error.h"
#include "model/gpt.h"

namespace gt {
namespace {

std::vector<float> randn(size_t n, uint64_t seed, float std = 1.0f) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.f, std);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

double gelu64(double x) {  // tanh form (Hendrycks & Gimpel 2016)
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// round to nearest even bf16, and back
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// max |a-b| / max |b|
double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(a[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / den;
}

TEST(MatmulGelu, MatchesFloat64AndTheTwoPassForm) {
  const int N = 50, C = 96, OC = 136;
  auto inp = randn(N * C, 1), w = randn(C * OC, 2, 0.15f), bias = randn(OC, 3, 0.5f);
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    // float64 reference on the operands as this precision rounds them
    auto round = [&](float x) {
      if (p == Precision::bf16) return (double)from_bf16(to_bf16(x));
      if (p == Precision::fp16) return (double)static_cast<_Float16>(x);
      return (double)x;
    };
    std::vector<double> ref((size_t)N * OC);
    for (int i = 0; i < N; ++i)
      for (int o = 0; o < OC; ++o) {
        double s = bias[o];
        for (int c = 0; c < C; ++c) s += round(inp[i * C + c]) * round(w[c * OC + o]);
        ref[i * OC + o] = gelu64(s);
      }
    auto be = make_cpu_backend();
    be->set_precision(p);
    std::vector<float> fused((size_t)N * OC), pre((size_t)N * OC), two((size_t)N * OC);
    be->matmul_gelu_forward(fused.data(), inp.data(), w.data(), bias.data(), N, C, OC);
    be->matmul_forward(pre.data(), inp.data(), w.data(), bias.data(), N, C, OC);
    be->gelu_forward(two.data(), pre.data(), (int64_t)N * OC);
    // the products accumulate in f32 either way; what differs is the GELU's own evaluation
    EXPECT_LT(rel_err(fused, ref), 1e-5) << to_string(p);
    std::vector<double> two64(two.begin(), two.end());
    EXPECT_LT(rel_err(fused, two64), 1e-5) << to_string(p);
  }
}

TEST(MatmulGelu, Bf16ActivationsWriteTheRoundedBf16Output) {
  const int N = 33, C = 64, OC = 200;
  auto inp = randn(N * C, 4), w = randn(C * OC, 5, 0.15f), bias = randn(OC, 6, 0.5f);
  std::vector<uint16_t> in16(inp.size());
  for (size_t i = 0; i < inp.size(); ++i) in16[i] = to_bf16(inp[i]);
  auto be = make_cpu_backend();
  be->set_precision(Precision::bf16);
  std::vector<float> f32out((size_t)N * OC);
  be->matmul_gelu_forward(f32out.data(), inp.data(), w.data(), bias.data(), N, C, OC);
  be->set_bf16_activations(true);
  std::vector<uint16_t> out16((size_t)N * OC, 0xFFFF);  // NaN: every element must be written
  be->matmul_gelu_forward(reinterpret_cast<float*>(out16.data()),
                          reinterpret_cast<const float*>(in16.data()), w.data(), bias.data(), N, C,
                          OC);
  be->set_bf16_activations(false);
  // the same product, its f32 result rounded once to bf16
  for (size_t i = 0; i < out16.size(); ++i) ASSERT_EQ(out16[i], to_bf16(f32out[i])) << i;
}

struct Tokens {
  std::vector<int32_t> in, tg;
  Tokens(int n, int V) : in(n), tg(n) {
    std::mt19937 g(5);
    for (int i = 0; i < n; ++i) in[i] = g() % V, tg[i] = g() % V;
  }
};

/// The logits (B,T,V) of a forward without targets.
std::vector<float> logits(GPT& m, const Tokens& t, int B, int T, int V, bool for_backward) {
  m.forward(t.in.data(), nullptr, B, T, for_backward);
  return std::vector<float>(m.logits(), m.logits() + (size_t)B * T * V);
}

TEST(MatmulGelu, EvaluationForwardMatchesTheTrainingForward) {
  GPTConfig c{2, 2, 32, 16, 23};
  const int B = 3, T = 16;
  Tokens t(B * T, c.vocab_size);
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    for (Recompute rc : {Recompute::none, Recompute::gelu, Recompute::block}) {
      const std::string what = to_string(p) + " " + to_string(rc);
      auto be = make_profiling_backend(make_cpu_backend());
      be->set_precision(p);
      GPT m(c, B, rc, *be, /*fused=*/true);
      m.init_weights(11);
      // weights 10x GPT-2's initial scale, so that the MLPs move the logits
      Arena& a = m.params();
      for (size_t i = 0; i < a.size(); ++i)
        for (int64_t j = 0; j < a.at(i).numel(); ++j) a.at(i).f32()[j] *= 10.0f;
      be->weights_updated();
      auto eval = logits(m, t, B, T, c.vocab_size, false);
      EXPECT_EQ(profiling_stats(*be)->at("matmul_gelu_forward").calls, c.n_layer);
      EXPECT_EQ(profiling_stats(*be)->count("gelu_forward"), 0u);
      auto train = logits(m, t, B, T, c.vocab_size, true);
      EXPECT_EQ(profiling_stats(*be)->at("matmul_gelu_forward").calls, c.n_layer);
      // oneDNN's GELU against ours: f32 rounding, and in bf16 an occasional rounding flip of
      // a GELU output (one bf16 step is 0.4 %)
      std::vector<double> train64(train.begin(), train.end());
      EXPECT_LT(rel_err(eval, train64), p == Precision::fp32 ? 1e-5 : 1e-2) << what;
      // the losses too; a backward needs a training forward
      const float le = m.forward(t.in.data(), t.tg.data(), B, T, false);
      EXPECT_THROW(m.backward(1.0f / (B * T)), Error) << what;
      const float lt = m.forward(t.in.data(), t.tg.data(), B, T);
      EXPECT_NEAR(le, lt, (p == Precision::fp32 ? 1e-5 : 1e-2) * lt) << what;
      m.zero_grad();
      EXPECT_NO_THROW(m.backward(1.0f / (B * T))) << what;
    }
  }
}

TEST(MatmulGelu, UnfusedEvaluationKeepsTheTwoPassForm) {
  GPTConfig c{2, 2, 32, 16, 23};
  Tokens t(2 * 16, c.vocab_size);
  auto be = make_profiling_backend(make_cpu_backend());
  GPT m(c, 2, Recompute::none, *be, /*fused=*/false);
  m.init_weights(3);
  const float eval = m.forward(t.in.data(), t.tg.data(), 2, 16, /*for_backward=*/false);
  EXPECT_EQ(profiling_stats(*be)->count("matmul_gelu_forward"), 0u);
  EXPECT_EQ(eval, m.forward(t.in.data(), t.tg.data(), 2, 16));
}

}  // namespace
}  // namespace gt
