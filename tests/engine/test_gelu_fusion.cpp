// The MLP's GELU with fusion on. Training: gelu_forward_fused writes gelu and gelu', and
// matmul_backward_gelu multiplies mlp.c_proj's input gradient by gelu' as a post-op of its
// product. Forward-only passes (evaluation, sampling): c_fc and its GELU as one product with
// a GELU post-op (matmul_gelu_forward). Each against float64, its two-pass form, and inside
// the model.
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
#include "test_helpers.h"

namespace gt {
namespace {

using test::randn;

double gelu64(double x) {  // tanh form (Hendrycks & Gimpel 2016)
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double dgelu64(double x) {
  const double k = std::sqrt(2.0 / M_PI), th = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
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
  GT_NEEDS_CPU_BACKEND();
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
    auto be = make_backend("cpu");
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
  GT_NEEDS_CPU_BACKEND();
  const int N = 33, C = 64, OC = 200;
  auto inp = randn(N * C, 4), w = randn(C * OC, 5, 0.15f), bias = randn(OC, 6, 0.5f);
  std::vector<uint16_t> in16(inp.size());
  for (size_t i = 0; i < inp.size(); ++i) in16[i] = to_bf16(inp[i]);
  auto be = make_backend("cpu");
  be->set_precision(Precision::bf16);
  std::vector<float> f32out((size_t)N * OC);
  be->matmul_gelu_forward(f32out.data(), inp.data(), w.data(), bias.data(), N, C, OC);
  std::vector<uint16_t> out16((size_t)N * OC, 0xFFFF);  // NaN: every element must be written
  be->matmul_gelu_forward(DevPtr(out16.data(), DType::bf16), ConstDevPtr(in16.data(), DType::bf16),
                          w.data(), bias.data(), N, C, OC);
  // the same product, its f32 result rounded once to bf16
  for (size_t i = 0; i < out16.size(); ++i) ASSERT_EQ(out16[i], to_bf16(f32out[i])) << i;
}

TEST(GeluFused, WritesGeluAndItsDerivative) {
  GT_NEEDS_CPU_BACKEND();
  const int64_t n = 4099;
  auto x = randn(n, 7, 2.0f);
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    auto be = make_backend("cpu");
    be->set_precision(p);
    std::vector<float> g(n), d(n, -1.f), two(n);
    // the derivative as bf16 under bf16 (as the model plans fch_dgelu), else f32
    const DevPtr dg = p == Precision::bf16 ? DevPtr(d.data(), DType::bf16) : DevPtr(d.data());
    be->gelu_forward_fused(g.data(), dg, x.data(), n);
    be->gelu_forward(two.data(), x.data(), n);
    EXPECT_EQ(g, two) << to_string(p);  // the same GELU as gelu_forward, bitwise
    std::vector<double> g64(n), d64(n);
    for (int64_t i = 0; i < n; ++i) g64[i] = gelu64(x[i]), d64[i] = dgelu64(x[i]);
    EXPECT_LT(rel_err(g, g64), 1e-6) << to_string(p);
    std::vector<float> dv(n);
    if (p == Precision::bf16) {  // a bf16 array in the first half of the buffer
      const auto* d16 = reinterpret_cast<const uint16_t*>(d.data());
      for (int64_t i = 0; i < n; ++i) dv[i] = from_bf16(d16[i]);
    } else {
      dv = d;
    }
    EXPECT_LT(rel_err(dv, d64), p == Precision::fp32 ? 1e-6 : 4e-3) << to_string(p);
    // null derivative: the output alone
    std::vector<float> g2(n);
    be->gelu_forward_fused(g2.data(), nullptr, x.data(), n);
    EXPECT_EQ(g2, g) << to_string(p);
  }
}

TEST(GeluFused, MatmulBackwardGeluMatchesFloat64AndTheTwoPassForm) {
  GT_NEEDS_CPU_BACKEND();
  const int N = 40, C = 120, OC = 72;  // dinp (N,C) = (dout (N,OC) @ W^T) * gelu'(pre)
  auto pre = randn(N * C, 8, 1.5f), w = randn(C * OC, 9, 0.1f), dout = randn(N * OC, 10);
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    const std::string what = to_string(p);
    auto be = make_backend("cpu");
    be->set_precision(p);
    std::vector<float> g(N * C), dg(N * C);
    be->gelu_forward_fused(g.data(), dg.data(), pre.data(), (int64_t)N * C);
    std::vector<float> dinp(N * C), dw(C * OC, 0.f), db(OC, 0.f);
    be->matmul_backward_gelu(dinp.data(), dw.data(), db.data(), dout.data(), g.data(), w.data(),
                             dg.data(), N, C, OC);
    // the two-pass form: product, then gelu_backward
    std::vector<float> dinp2(N * C), dw2(C * OC, 0.f), db2(OC, 0.f);
    be->matmul_backward(dinp2.data(), dw2.data(), db2.data(), dout.data(), g.data(), w.data(), N, C,
                        OC);
    be->gelu_backward(dinp2.data(), pre.data(), dinp2.data(), (int64_t)N * C);
    EXPECT_EQ(dw, dw2) << what;  // the weight and bias gradients are the same products
    EXPECT_EQ(db, db2) << what;
    std::vector<double> ref(N * C), two(dinp2.begin(), dinp2.end());
    for (int i = 0; i < N; ++i)
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int o = 0; o < OC; ++o) s += (double)dout[i * OC + o] * w[c * OC + o];
        ref[i * C + c] = s * dgelu64(pre[i * C + c]);
      }
    const double tol = p == Precision::fp32 ? 1e-5 : 2e-2;
    EXPECT_LT(rel_err(dinp, ref), tol) << what;
    EXPECT_LT(rel_err(dinp, two), tol) << what;
  }
}

TEST(GeluFused, Bf16ActivationsHandTheGradientOnInPlace) {
  GT_NEEDS_CPU_BACKEND();
  // With bf16 activations the fused product writes dinp as bf16 into dinp's own memory and
  // the next matmul_backward takes it: the same results as with f32 dinp rounded there.
  const int N = 64, C = 96, OC = 48, C2 = 32;
  auto pre = randn(N * C, 11, 1.5f), w = randn(C * OC, 12, 0.1f), dout = randn(N * OC, 13),
       x2 = randn(N * C2, 14), w2 = randn(C2 * C, 15, 0.1f);
  std::vector<uint16_t> x2_16(x2.size());
  for (size_t i = 0; i < x2.size(); ++i) x2_16[i] = to_bf16(x2[i]);
  std::vector<float> dx2[2], dw2[2];
  for (int on = 0; on < 2; ++on) {
    auto be = make_backend("cpu");
    be->set_precision(Precision::bf16);
    std::vector<float> g(N * C), dg(N * C), dinp(N * C), dw(C * OC, 0.f), db(OC, 0.f);
    // on: the product writes dinp as a bf16 tensor (in dinp's memory) for the next product
    const DevPtr d = on ? DevPtr(dinp.data(), DType::bf16) : DevPtr(dinp.data());
    be->gelu_forward_fused(g.data(), DevPtr(dg.data(), DType::bf16), pre.data(), (int64_t)N * C);
    be->matmul_backward_gelu(d, dw.data(), db.data(), dout.data(), g.data(), w.data(),
                             ConstDevPtr(dg.data(), DType::bf16), N, C, OC);
    dx2[on].assign(N * C2, 0.f);
    dw2[on].assign(C2 * C, 0.f);
    const ConstDevPtr x = on ? ConstDevPtr(x2_16.data(), DType::bf16) : ConstDevPtr(x2.data());
    be->matmul_backward(dx2[on].data(), dw2[on].data(), nullptr, d, x, w2.data(), N, C2, C);
  }
  EXPECT_EQ(dx2[0], dx2[1]);
  EXPECT_EQ(dw2[0], dw2[1]);
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
  return m.logits();  // (B, T, V) of the last forward
}

TEST(MatmulGelu, EvaluationForwardMatchesTheTrainingForward) {
  GT_NEEDS_CPU_BACKEND();
  GPTConfig c{2, 2, 32, 16, 23};
  const int B = 3, T = 16;
  Tokens t(B * T, c.vocab_size);
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    for (Recompute rc : {Recompute::none, Recompute::gelu, Recompute::block}) {
      const std::string what = to_string(p) + " " + to_string(rc);
      auto be = make_profiling_backend(make_backend("cpu"));
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
      EXPECT_EQ(profiling_stats(*be)->count("gelu_forward_fused"), 0u);
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

TEST(GeluFused, RefusesAPrecisionChangedAfterTheModelWasBuilt) {
  GT_NEEDS_CPU_BACKEND();
  // gelu' was planned as bf16; an fp32 pass would write f32 into it (twice the bytes)
  GPTConfig c{2, 2, 32, 16, 23};
  Tokens t(2 * 16, c.vocab_size);
  auto be = make_backend("cpu");
  be->set_precision(Precision::bf16);
  GPT m(c, 2, Recompute::none, *be, /*fused=*/true, /*bf16_activations=*/false);
  m.init_weights(3);
  be->set_precision(Precision::fp32);
  EXPECT_THROW(m.forward(t.in.data(), t.tg.data(), 2, 16), Error);
  be->set_precision(Precision::bf16);
  EXPECT_NO_THROW(m.forward(t.in.data(), t.tg.data(), 2, 16));
  be->set_precision(Precision::fp32);
  EXPECT_THROW(m.backward(1.0f / 32), Error);
}

TEST(MatmulGelu, UnfusedEvaluationKeepsTheTwoPassForm) {
  GT_NEEDS_CPU_BACKEND();
  GPTConfig c{2, 2, 32, 16, 23};
  Tokens t(2 * 16, c.vocab_size);
  auto be = make_profiling_backend(make_backend("cpu"));
  GPT m(c, 2, Recompute::none, *be, /*fused=*/false);
  m.init_weights(3);
  const float eval = m.forward(t.in.data(), t.tg.data(), 2, 16, /*for_backward=*/false);
  EXPECT_EQ(profiling_stats(*be)->count("matmul_gelu_forward"), 0u);
  EXPECT_EQ(eval, m.forward(t.in.data(), t.tg.data(), 2, 16));
}

}  // namespace
}  // namespace gt
