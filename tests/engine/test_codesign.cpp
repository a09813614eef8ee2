// Co-design tests (issue 5): bf16 and fp16 matrix products against float64 references,
// bf16 training against fp32, the fp16 loss scaler, and each fused kernel against its
// unfused form, alone and inside the model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "backend/adam_math.h"
#include "backend/backend.h"
#include "core/error.h"
#include "model/gpt.h"
#include "test_helpers.h"
#include "train/config.h"
#include "train/precision.h"
#include "train/trainer.h"

namespace gt {
namespace {

using test::randn;

/// max |a-b| / max |b|
double rel_err(const float* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(a[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / den;
}
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> bd(b.begin(), b.end());
  return rel_err(a.data(), bd.data(), a.size());
}

// out = inp @ w + bias, dinp = dout @ w^T, dw = inp^T @ dout, all in float64
struct MatmulRef {
  std::vector<double> out, dinp, dw;
  MatmulRef(const std::vector<float>& inp, const std::vector<float>& w,
            const std::vector<float>& bias, const std::vector<float>& dout, int N, int C, int OC)
      : out((size_t)N * OC), dinp((size_t)N * C), dw((size_t)C * OC) {
    for (int i = 0; i < N; ++i)
      for (int o = 0; o < OC; ++o) {
        double s = bias[o];
        for (int c = 0; c < C; ++c) s += (double)inp[i * C + c] * w[c * OC + o];
        out[i * OC + o] = s;
      }
    for (int i = 0; i < N; ++i)
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int o = 0; o < OC; ++o) s += (double)dout[i * OC + o] * w[c * OC + o];
        dinp[i * C + c] = s;
      }
    for (int c = 0; c < C; ++c)
      for (int o = 0; o < OC; ++o) {
        double s = 0;
        for (int i = 0; i < N; ++i) s += (double)inp[i * C + c] * dout[i * OC + o];
        dw[c * OC + o] = s;
      }
  }
};

void check_lowp_matmul(Precision p, double tol_hi) {
  const int N = 64, C = 96, OC = 80;
  auto inp = randn(N * C, 1), w = randn(C * OC, 2, 0.1f), bias = randn(OC, 3),
       dout = randn(N * OC, 4);
  MatmulRef ref(inp, w, bias, dout, N, C, OC);
  auto be = make_backend("cpu");
  be->set_precision(p);
  EXPECT_EQ(be->precision(), p);
  std::vector<float> out(N * OC), dinp(N * C), dw(C * OC, 0.f);
  be->matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, C, OC);
  be->matmul_backward(dinp.data(), dw.data(), nullptr, dout.data(), inp.data(), w.data(), N, C, OC);
  double e1 = rel_err(out.data(), ref.out.data(), out.size());
  double e2 = rel_err(dinp.data(), ref.dinp.data(), dinp.size());
  double e3 = rel_err(dw.data(), ref.dw.data(), dw.size());
  EXPECT_LT(e1, tol_hi);
  EXPECT_LT(e2, tol_hi);
  EXPECT_LT(e3, tol_hi);
  // the operands really are rounded to 16 bits (fp32 would be near 1e-7)
  EXPECT_GT(std::max({e1, e2, e3}), 1e-5);
}

TEST(Precision, Bf16MatmulMatchesFloat64WithinBf16Tolerance) {
  GT_NEEDS_CPU_BACKEND();
  check_lowp_matmul(Precision::bf16, 1e-2);
}

TEST(Precision, Fp16MatmulMatchesFloat64WithinFp16Tolerance) {
  GT_NEEDS_CPU_BACKEND();
  check_lowp_matmul(Precision::fp16, 2e-3);
}

TEST(Precision, WeightCopiesRefreshOnlyAfterWeightsUpdated) {
  GT_NEEDS_CPU_BACKEND();
  const int N = 4, C = 8, OC = 8;
  auto inp = randn(N * C, 1), w = randn(C * OC, 2);
  auto be = make_backend("cpu");
  be->set_precision(Precision::bf16);
  std::vector<float> a(N * OC), b(N * OC);
  be->matmul_forward(a.data(), inp.data(), w.data(), nullptr, N, C, OC);
  for (auto& x : w) x *= 2.0f;
  be->matmul_forward(b.data(), inp.data(), w.data(), nullptr, N, C, OC);
  EXPECT_EQ(a, b);  // stale copy until told
  be->weights_updated();
  be->matmul_forward(b.data(), inp.data(), w.data(), nullptr, N, C, OC);
  for (int i = 0; i < N * OC; ++i) EXPECT_FLOAT_EQ(b[i], 2.0f * a[i]);
}

// With a 1 x 1 input of 1.0 the product returns the bf16 copy of each weight exactly.
std::vector<float> bf16_weight_copy(Backend& be, const std::vector<float>& w) {
  const float one = 1.0f;
  std::vector<float> out(w.size());
  be.matmul_forward(out.data(), &one, w.data(), nullptr, 1, 1, (int)w.size());
  return out;
}

TEST(Precision, StochasticRoundingIsUnbiasedAndReproducible) {
  GT_NEEDS_CPU_BACKEND();
  // x = 1 + 2^-9 lies a quarter of the way from bf16 1.0 to its neighbour 1 + 2^-7
  const float x = 1.0f + std::ldexp(1.0f, -9), lo = 1.0f, hi = 1.0f + std::ldexp(1.0f, -7);
  std::vector<float> w(1 << 16, x);
  auto be = make_backend("cpu");
  be->set_precision(Precision::bf16);
  EXPECT_EQ(bf16_weight_copy(*be, w)[0], lo);  // round to nearest even: always down
  be->set_stochastic_rounding(true, 7);
  auto r = bf16_weight_copy(*be, w);
  double mean = 0;
  for (float v : r) {
    ASSERT_TRUE(v == lo || v == hi) << v;
    mean += v;
  }
  mean /= r.size();
  // E = x; the standard error of the mean is (hi-lo) sqrt(p(1-p)/n) = 1.3e-5
  EXPECT_NEAR(mean, x, 6e-5);
  // same seed, same copy (after the weights change and change back); another seed differs
  be->weights_updated();
  EXPECT_EQ(bf16_weight_copy(*be, w), r);
  be->set_stochastic_rounding(true, 8);
  EXPECT_NE(bf16_weight_copy(*be, w), r);
  // exactly representable values and infinities are never moved
  std::vector<float> exact{1.0f, -2.5f, 0.0f, INFINITY};
  be->set_stochastic_rounding(true, 9);
  EXPECT_EQ(bf16_weight_copy(*be, exact), exact);
}

// Under bf16 a product's input can be a bf16 tensor, and GELU's gradient can reach the next
// product as a bf16 tensor the model planned for it (DevPtr carries the type): the same
// gradients, bit for bit, as the f32 hand-over rounded at the product; a bf16 tensor under
// another precision is refused.
TEST(Precision, Bf16ActivationsAndGradientHandOff) {
  GT_NEEDS_CPU_BACKEND();
  const int N = 6, C = 8, OC = 32;
  auto inp = randn(N * C, 21), w = randn(C * OC, 22), pre = randn(N * OC, 23);
  std::vector<uint16_t> inp16(N * C);
  for (int i = 0; i < N * C; ++i) {  // values exactly representable in bf16
    uint32_t u;
    std::memcpy(&u, &inp[i], 4);
    u &= 0xFFFF0000u;
    std::memcpy(&inp[i], &u, 4);
    inp16[i] = uint16_t(u >> 16);
  }
  auto run = [&](bool act16, std::vector<float>& dinp, std::vector<float>& dw,
                 std::vector<float>& db) {
    auto be = make_backend("cpu");
    be->set_precision(Precision::bf16);
    auto d = randn(N * OC, 24);
    dinp.assign(N * C, 0.f), dw.assign(C * OC, 0.f), db.assign(OC, 0.f);
    std::vector<uint16_t> d16(N * OC);
    const DevPtr dgrad = act16 ? DevPtr(d16.data(), DType::bf16) : DevPtr(d.data());
    be->gelu_backward(dgrad, pre.data(), d.data(), N * OC);
    const ConstDevPtr x = act16 ? ConstDevPtr(inp16.data(), DType::bf16) : inp.data();
    be->matmul_backward(dinp.data(), dw.data(), db.data(), dgrad, x, w.data(), N, C, OC);
  };
  std::vector<float> a1, a2, a3, b1, b2, b3;
  run(false, a1, a2, a3);
  run(true, b1, b2, b3);
  EXPECT_EQ(a1, b1);
  EXPECT_EQ(a2, b2);
  EXPECT_EQ(a3, b3);
  auto be = make_backend("cpu");  // fp32
  std::vector<float> out(N * C);
  EXPECT_THROW(be->matmul_forward(out.data(), ConstDevPtr(inp16.data(), DType::bf16), w.data(),
                                  nullptr, N, C, OC),
               Error);
  EXPECT_THROW(be->gelu_forward(DevPtr(inp16.data(), DType::bf16), pre.data(), N * C), Error);
}

TEST(Precision, Fp8IsRefusedOnTheCpuWithAClearMessage) {
  GT_NEEDS_CPU_BACKEND();
  auto be = make_backend("cpu");
  try {
    be->set_precision(Precision::fp8);
    FAIL() << "fp8 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
  TrainConfig c;
  c.data_path = "x";
  c.precision = Precision::fp8;
  EXPECT_THROW(c.validate(), Error);
  c.precision = Precision::bf16;
  EXPECT_NO_THROW(c.validate());
  c.fusion = true;
  EXPECT_NO_THROW(c.validate());
  EXPECT_THROW(c.set("train.fusion", "maybe", "test"), Error);
  EXPECT_THROW(c.set("train.precision", "fp12", "test"), Error);
}

TrainConfig small_config(const std::string& data_path) {
  return test::small_train_config(data_path, 64, 32, 50, 5);
}

std::vector<double> train_losses(TrainConfig c, const std::string& dir) {
  Trainer tr(c, dir, false, nullptr);
  return tr.run().losses;
}

TEST(Precision, Bf16LossCurveFollowsFp32) {
  GT_NEEDS_CPU_BACKEND();
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(20000));
  TrainConfig c = small_config(d.file("t.txt"));
  auto f32 = train_losses(c, d.file("fp32"));
  c.precision = Precision::bf16;
  auto b16 = train_losses(c, d.file("bf16"));
  ASSERT_EQ(f32.size(), 50u);
  ASSERT_EQ(b16.size(), 50u);
  EXPECT_LT(f32.back(), 0.8 * f32.front());  // it learns
  double worst = 0;
  for (size_t i = 0; i < f32.size(); ++i)
    worst = std::max(worst, std::fabs(b16[i] - f32[i]) / f32[i]);
  EXPECT_LT(worst, 0.03);
  EXPECT_GT(worst, 0.0);  // and is not secretly fp32
}

TEST(Precision, Fp16TrainsAndReportsTheScale) {
  GT_NEEDS_CPU_BACKEND();
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(20000));
  TrainConfig c = small_config(d.file("t.txt"));
  c.max_steps = 20;
  auto f32 = train_losses(c, d.file("fp32"));
  c.precision = Precision::fp16;
  Trainer tr(c, d.file("fp16"), false, nullptr);
  auto r = tr.run();
  EXPECT_EQ(r.skipped_steps, 0);
  EXPECT_EQ(r.loss_scale, 65536.0);
  for (size_t i = 0; i < f32.size(); ++i)
    EXPECT_NEAR(r.losses[i], f32[i], 0.02 * f32[i]) << "step " << i;
  std::ifstream m(d.file("fp16") + "/metrics.jsonl");
  std::string line;
  std::getline(m, line);
  EXPECT_NE(line.find("\"loss_scale\":65536"), std::string::npos) << line;
}

TEST(GradScalerTest, HalvesOnOverflowAndDoublesAfter2000CleanSteps) {
  GradScaler s(true);
  EXPECT_EQ(s.scale(), 65536.0);
  s.update(true);
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.skipped_steps(), 1);
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 32768.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 65536.0);
  for (int i = 0; i < 1000; ++i) s.update(false);
  s.update(true);  // an overflow restarts the count
  for (int i = 0; i < 1999; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 32768.0);
  GradScaler off(false);
  off.update(true);
  EXPECT_EQ(off.scale(), 1.0);
  EXPECT_EQ(off.skipped_steps(), 0);
}

std::vector<float> arena_copy(Arena& a) {
  const float* p = static_cast<const float*>(a.base());
  return std::vector<float>(p, p + a.bytes() / sizeof(float));
}

TEST(Precision, Fp16OverflowSkipsExactlyThatStep) {
  GT_NEEDS_CPU_BACKEND();
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(20000));
  TrainConfig c = small_config(d.file("t.txt"));
  c.precision = Precision::fp16;
  Trainer tr(c, d.file("run"), false, nullptr);
  tr.train_step();
  ASSERT_FALSE(tr.last_step_skipped());
  ASSERT_EQ(tr.optimizer_steps(), 1);
  auto p0 = arena_copy(tr.model().params()), m0 = arena_copy(tr.adam_m()),
       v0 = arena_copy(tr.adam_v());
  // a scale so large that the scaled loss gradient overflows fp16
  tr.scaler().restore(1e30, 0, 0);
  tr.train_step();
  EXPECT_TRUE(tr.last_step_skipped());
  EXPECT_EQ(tr.scaler().scale(), 5e29);
  EXPECT_EQ(tr.scaler().skipped_steps(), 1);
  EXPECT_EQ(tr.optimizer_steps(), 1);
  EXPECT_EQ(tr.step(), 2);
  EXPECT_EQ(arena_copy(tr.model().params()), p0);
  EXPECT_EQ(arena_copy(tr.adam_m()), m0);
  EXPECT_EQ(arena_copy(tr.adam_v()), v0);
  // a sane scale: the next step is taken
  tr.scaler().restore(65536, 0, 1);
  tr.train_step();
  EXPECT_FALSE(tr.last_step_skipped());
  EXPECT_EQ(tr.optimizer_steps(), 2);
  EXPECT_NE(arena_copy(tr.model().params()), p0);
}

// ---- fused kernels ----------------------------------------------------------------------

TEST(Fusion, ResidualLayernormEqualsResidualThenLayernorm) {
  GT_NEEDS_CPU_BACKEND();
  const int N = 37, C = 48;
  auto a = randn(N * C, 1), b = randn(N * C, 2), w = randn(C, 3), bias = randn(C, 4);
  auto be = make_backend("cpu");
  std::vector<float> r1(N * C), o1(N * C), m1(N), s1(N), r2(N * C), o2(N * C), m2(N), s2(N);
  be->residual_forward(r1.data(), a.data(), b.data(), N * C);
  be->layernorm_forward(o1.data(), m1.data(), s1.data(), r1.data(), w.data(), bias.data(), N, C);
  be->residual_layernorm_forward(r2.data(), o2.data(), m2.data(), s2.data(), a.data(), b.data(),
                                 w.data(), bias.data(), N, C);
  EXPECT_EQ(r1, r2);
  EXPECT_LT(rel_err(o2, o1), 1e-5);
  EXPECT_LT(rel_err(s2, s1), 1e-5);
}

/// Causal attention output (B,T,C) in float64 from qkv (B,T,3C).
std::vector<double> attention_reference(const std::vector<float>& qkv, int B, int T, int C,
                                        int NH) {
  const int hs = C / NH;
  std::vector<double> ref(B * T * C, 0.0);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        std::vector<double> s(t + 1);
        double mx = -1e300, sum = 0;
        for (int u = 0; u <= t; ++u) {
          double x = 0;
          for (int i = 0; i < hs; ++i)
            x += (double)qkv[(b * T + t) * 3 * C + h * hs + i] *
                 qkv[(b * T + u) * 3 * C + C + h * hs + i];
          s[u] = x / std::sqrt((double)hs);
          mx = std::max(mx, s[u]);
        }
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (int u = 0; u <= t; ++u)
          for (int i = 0; i < hs; ++i)
            ref[(b * T + t) * C + h * hs + i] +=
                s[u] / sum * qkv[(b * T + u) * 3 * C + 2 * C + h * hs + i];
      }
  return ref;
}

// The attention products take 16-bit operands under bf16/fp16 (scores, softmax and sums stay
// fp32): forward against float64, backward against the fp32 kernels (themselves checked
// against finite differences in Kernels.AttentionForwardBackward), stored and fused forms.
class AttentionPrecision : public ::testing::TestWithParam<std::tuple<Precision, bool>> {};

TEST_P(AttentionPrecision, MatchesFloat64AndFp32WithinItsTolerance) {
  GT_NEEDS_CPU_BACKEND();
  const auto [prec, fused] = GetParam();
  const double tol = prec == Precision::bf16 ? 2e-2 : 2e-3;  // ~8 and ~11 mantissa bits
  const int B = 2, T = 100, C = 48, NH = 3;
  auto qkv = randn(B * T * 3 * C, 21), dout = randn(B * T * C, 22);
  auto be32 = make_backend("cpu"), be = make_backend("cpu");
  be->set_precision(prec);
  std::vector<float> out(B * T * C), att(B * NH * T * T), lse(B * NH * T), dq(B * T * 3 * C);
  std::vector<float> out32(B * T * C), att32(B * NH * T * T), dq32(B * T * 3 * C);
  be32->attention_forward(out32.data(), att32.data(), qkv.data(), B, T, C, NH);
  be32->attention_backward(dq32.data(), dout.data(), qkv.data(), att32.data(), B, T, C, NH);
  if (fused) {
    be->attention_forward_fused(out.data(), lse.data(), qkv.data(), B, T, C, NH);
    be->attention_backward_fused(dq.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T,
                                 C, NH);
  } else {
    be->attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    be->attention_backward(dq.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
  }
  auto ref = attention_reference(qkv, B, T, C, NH);
  const double fwd = rel_err(out.data(), ref.data(), ref.size());
  const double bwd = rel_err(dq, dq32);
  EXPECT_LT(fwd, tol);
  EXPECT_LT(bwd, tol);
  // and the 16-bit operands are really used: the error is above fp32 rounding
  EXPECT_GT(fwd, 1e-5);
  EXPECT_GT(bwd, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Precisions, AttentionPrecision,
                         ::testing::Combine(::testing::Values(Precision::bf16, Precision::fp16),
                                            ::testing::Bool()));

// 64-byte aligned floats, as the model's arenas give them: with a head size that is a multiple
// of 16, attention writes its output rows with streaming stores only into such buffers.
struct AlignedFloats {
  float* p;
  size_t n;
  explicit AlignedFloats(size_t n_)
      : p(static_cast<float*>(std::aligned_alloc(64, (n_ * sizeof(float) + 63) / 64 * 64))),
        n(n_) {}
  ~AlignedFloats() { std::free(p); }
  std::vector<float> vec() const { return {p, p + n}; }
};

// (T, C, NH). Query blocks of 128 rows: T = 13 one block, 150 two (128 + 22), 300 three
// (128 + 128 + 44); C = 128 with 2 heads is head size 64, whose rows take the streaming stores.
class FusedAttention : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(FusedAttention, WithoutTheTxTMatrixMatchesTheReference) {
  GT_NEEDS_CPU_BACKEND();
  const auto [T, C, NH] = GetParam();
  const int B = 2;
  auto qkv = randn(B * T * 3 * C, 5), dout = randn(B * T * C, 6);
  auto be = make_backend("cpu");
  std::vector<float> out1(B * T * C), att(B * NH * T * T), dq1(B * T * 3 * C);
  AlignedFloats out2(B * T * C), lse(B * NH * T), dq2(B * T * 3 * C);
  be->attention_forward(out1.data(), att.data(), qkv.data(), B, T, C, NH);
  be->attention_backward(dq1.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
  be->attention_forward_fused(out2.p, lse.p, qkv.data(), B, T, C, NH);
  be->attention_backward_fused(dq2.p, dout.data(), qkv.data(), out2.p, lse.p, B, T, C, NH);
  EXPECT_LT(rel_err(out2.vec(), out1), 1e-5);
  EXPECT_LT(rel_err(dq2.vec(), dq1), 1e-5);
  auto ref = attention_reference(qkv, B, T, C, NH);
  EXPECT_LT(rel_err(out2.p, ref.data(), ref.size()), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Lengths, FusedAttention,
                         ::testing::Values(std::tuple{13, 24, 3}, std::tuple{150, 24, 3},
                                           std::tuple{300, 24, 3}, std::tuple{150, 128, 2}));

TEST(Fusion, SoftmaxCrossEntropyGradientInPlace) {
  GT_NEEDS_CPU_BACKEND();
  const int N = 9, V = 37;
  auto logits = randn(N * V, 7, 3.0f);
  std::vector<int32_t> tg(N);
  for (int i = 0; i < N; ++i) tg[i] = (i * 7) % V;
  auto be = make_backend("cpu");
  std::vector<float> probs(N * V), l1(N), d1(N * V), l2(N), fused = logits;
  be->softmax_crossentropy_forward(probs.data(), l1.data(), logits.data(), tg.data(), N, V);
  be->softmax_crossentropy_backward(d1.data(), probs.data(), tg.data(), 0.25f, N, V);
  be->softmax_crossentropy_fused(fused.data(), l2.data(), tg.data(), 0.25f, N, V);
  EXPECT_LT(rel_err(l2, l1), 1e-6);
  EXPECT_LT(rel_err(fused, d1), 1e-6);
  tg[3] = V;
  EXPECT_THROW(be->softmax_crossentropy_fused(fused.data(), l2.data(), tg.data(), 1, N, V), Error);
}

TEST(Fusion, OneAdamwPassEqualsPerTensorUpdates) {
  GT_NEEDS_CPU_BACKEND();
  auto be = make_backend("cpu");
  std::vector<int64_t> n = {100000, 7, 33};
  std::vector<float> wd = {0.1f, 0.f, 0.1f};
  std::vector<std::vector<float>> p1, g, m1, v1, p2, m2, v2;
  for (int i = 0; i < 3; ++i) {
    p1.push_back(randn(n[i], 10 + i));
    g.push_back(randn(n[i], 20 + i));
    m1.push_back(randn(n[i], 30 + i, 0.1f));
    v1.push_back(randn(n[i], 40 + i, 0.1f));
    for (auto& x : v1.back()) x = x * x;
  }
  p2 = p1, m2 = m1, v2 = v1;
  const float mult = 0.5f;
  std::vector<float*> pp, mm, vv;
  std::vector<const float*> gg;
  for (int i = 0; i < 3; ++i) {
    std::vector<float> gs = g[i];
    for (auto& x : gs) x *= mult;
    be->adamw_update(p1[i].data(), gs.data(), m1[i].data(), v1[i].data(), n[i], 1e-3f, 0.9f, 0.99f,
                     1e-8f, wd[i], 7);
    pp.push_back(p2[i].data()), mm.push_back(m2[i].data()), vv.push_back(v2[i].data());
    gg.push_back(g[i].data());
  }
  be->adamw_fused(pp.data(), gg.data(), mm.data(), vv.data(), n.data(), wd.data(), 3, mult, 1e-3f,
                  0.9f, 0.99f, 1e-8f, 7);
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(rel_err(p2[i], p1[i]), 1e-6);
    EXPECT_LT(rel_err(m2[i], m1[i]), 1e-6);
    EXPECT_LT(rel_err(v2[i], v1[i]), 1e-6);
  }
}

// The one AdamW loop (train/adamw.h) over a tensor cut into pieces, as ZeRO-1 cuts its
// shard, updates as over the whole tensor: bit for bit, fused and unfused.
TEST(Optimizer, PiecesOfATensorUpdateAsTheWholeTensor) {
  auto be = make_backend("ref");
  const int64_t n = 1000;
  for (bool fused : {false, true}) {
    const TrainConfig cfg;  // beta1, beta2, eps; fused is adamw_apply's own argument
    std::vector<float> p1 = randn(n, 1), g1 = randn(n, 2), m1 = randn(n, 3, 0.1f),
                       v1 = randn(n, 4, 0.1f);
    for (auto& x : v1) x = x * x;
    std::vector<float> p2 = p1, g2 = g1, m2 = m1, v2 = v1;
    adamw_apply(*be, AdamPieces({{p1.data(), g1.data(), m1.data(), v1.data(), n, 0.1f}}), 0.25,
                1e-3f, cfg, fused, 3);
    std::vector<AdamPiece> pieces;
    for (int64_t lo : {0, 1, 333, 999}) {  // [0,1) [1,333) [333,999) [999,1000)
      const int64_t hi = lo == 0 ? 1 : lo == 1 ? 333 : lo == 333 ? 999 : n;
      pieces.push_back(
          {p2.data() + lo, g2.data() + lo, m2.data() + lo, v2.data() + lo, hi - lo, 0.1f});
    }
    adamw_apply(*be, AdamPieces(pieces), 0.25, 1e-3f, cfg, fused, 3);
    EXPECT_EQ(p1, p2) << "fused " << fused;
    EXPECT_EQ(m1, m2) << "fused " << fused;
    EXPECT_EQ(v1, v2) << "fused " << fused;
    EXPECT_EQ(g1, g2) << "fused " << fused;  // unfused: both scaled in place by 0.25
    EXPECT_NE(p1, randn(n, 1)) << "the weights moved";
  }
}

// The gradient multiplier: the loss scale undone, then torch's clip_grad_norm_ coefficient, from
// the sum of squares of the scaled gradients (here of norms 512, 10 and 80: exact square roots).
TEST(Optimizer, GradientMultiplierUnscalesThenClips) {
  // no clip below the norm: norm 512 / 1024 = 0.5
  EXPECT_DOUBLE_EQ(adam_grad_mult(512.0 * 512.0, 1024.0, 1.0), 1.0 / 1024);
  EXPECT_DOUBLE_EQ(adam_grad_mult(100.0, 1.0, 1.0), 1.0 / (10.0 + 1e-6));
  EXPECT_DOUBLE_EQ(adam_grad_mult(80.0 * 80.0, 8.0, 2.0), 2.0 / (10.0 + 1e-6) / 8.0);  // norm 10
  EXPECT_DOUBLE_EQ(adam_grad_mult(100.0, 1.0, 0.0), 1.0);  // clip 0: off
}

struct ModelRun {
  float loss;
  std::vector<float> grads;
};
ModelRun run_model(bool fused, Recompute rc, Precision p = Precision::fp32) {
  GPTConfig c{2, 2, 32, 16, 23};
  auto be = make_backend("cpu");
  be->set_precision(p);
  GPT m(c, 3, rc, *be, fused);
  m.init_weights(11);
  std::vector<int32_t> in(48), tg(48);
  std::mt19937 g(5);
  for (int i = 0; i < 48; ++i) in[i] = g() % 23, tg[i] = g() % 23;
  m.zero_grad();
  ModelRun r;
  r.loss = m.forward(in.data(), tg.data(), 3, 16);
  m.backward(1.0f / 48);
  r.grads = arena_copy(m.grads());
  return r;
}

TEST(Fusion, FusedModelGivesTheSameLossAndGradients) {
  GT_NEEDS_CPU_BACKEND();
  for (Precision p : {Precision::fp32, Precision::bf16}) {
    ModelRun u = run_model(false, Recompute::none, p);
    double tol = p == Precision::fp32 ? 1e-5 : 1e-2;
    for (Recompute rc : {Recompute::none, Recompute::gelu, Recompute::gelu_ln, Recompute::block}) {
      ModelRun f = run_model(true, rc, p);
      EXPECT_NEAR(f.loss, u.loss, tol * u.loss) << to_string(p) << " " << to_string(rc);
      EXPECT_LT(rel_err(f.grads, u.grads), p == Precision::fp32 ? 1e-4 : 5e-2)
          << to_string(p) << " " << to_string(rc);
    }
  }
}

TEST(Fusion, FusedTrainingFollowsUnfused) {
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(20000));
  TrainConfig c = small_config(d.file("t.txt"));
  c.max_steps = 20;
  auto u = train_losses(c, d.file("u"));
  c.fusion = true;
  auto f = train_losses(c, d.file("f"));
  for (size_t i = 0; i < u.size(); ++i) EXPECT_NEAR(f[i], u[i], 1e-4 * u[i]) << "step " << i;
}

TEST(Fusion, MemoryPlanShrinks) {
  GT_NEEDS_CPU_BACKEND();
  GPTConfig c{6, 6, 384, 256, 65};
  auto be = make_backend("cpu");
  const Precision fp32 = Precision::fp32;
  for (Recompute rc : {Recompute::none, Recompute::gelu, Recompute::gelu_ln, Recompute::block}) {
    MemoryPlan u = plan_memory(c, 8, rc, false, fp32, *be),
               f = plan_memory(c, 8, rc, true, fp32, *be);
    EXPECT_LT(f.activations_bytes, u.activations_bytes) << to_string(rc);
    EXPECT_LT(f.scratch_bytes, u.scratch_bytes) << to_string(rc);
    EXPECT_EQ(f.params_bytes, u.params_bytes);
  }
  // and the model allocates what was planned
  GPTConfig s{2, 2, 32, 16, 23};
  GPT m(s, 3, Recompute::gelu, *be, true);
  MemoryPlan p = plan_memory(s, 3, Recompute::gelu, true, fp32, *be);
  EXPECT_EQ(m.memory().total(), p.total());
}

TEST(MemoryBudget, LargestBatchIsExactAndRecomputeFitsMore) {
  GT_NEEDS_CPU_BACKEND();
  GPTConfig c{6, 6, 384, 256, 65};
  const size_t budget = size_t(2) << 30;
  auto be = make_backend("cpu");
  int prev = 0;
  for (Recompute rc : {Recompute::none, Recompute::gelu, Recompute::gelu_ln, Recompute::block}) {
    for (Precision p : {Precision::fp32, Precision::bf16}) {
      int b = largest_batch_that_fits(c, rc, false, p, budget, *be);
      ASSERT_GT(b, 0);
      EXPECT_LE(plan_memory(c, b, rc, false, p, *be).total(), budget);
      EXPECT_GT(plan_memory(c, b + 1, rc, false, p, *be).total(), budget);
    }
    int b = largest_batch_that_fits(c, rc, false, Precision::fp32, budget, *be);
    EXPECT_GE(b, prev) << to_string(rc);
    prev = b;
  }
  EXPECT_GT(largest_batch_that_fits(c, Recompute::block, false, Precision::fp32, budget, *be),
            largest_batch_that_fits(c, Recompute::none, false, Precision::fp32, budget, *be));
  EXPECT_GT(largest_batch_that_fits(c, Recompute::none, true, Precision::fp32, budget, *be),
            largest_batch_that_fits(c, Recompute::none, false, Precision::fp32, budget, *be));
  EXPECT_EQ(largest_batch_that_fits(c, Recompute::none, false, Precision::fp32, 1000, *be), 0);
  // the bf16 workspace is in the plan the model reports
  be->set_precision(Precision::bf16);
  GPTConfig s{2, 2, 32, 16, 23};
  GPT m(s, 3, Recompute::none, *be);
  EXPECT_GT(m.memory().workspace_bytes, 0u);
  EXPECT_EQ(m.memory().total(),
            plan_memory(s, 3, Recompute::none, false, Precision::bf16, *be).total());
}

TEST(MemoryBudget, TrainerTakesTheLargestBatchThatFits) {
  GT_NEEDS_CPU_BACKEND();
  test::TempDir d;
  test::write_file(d.file("t.txt"), test::sample_text(20000));
  TrainConfig c = small_config(d.file("t.txt"));
  c.max_steps = 1;
  c.model.vocab_size = 0;
  GPTConfig g = c.model;
  g.vocab_size = 27;  // the sample text's characters
  {
    Trainer probe(c, d.file("p"), false, nullptr);
    g.vocab_size = probe.config().model.vocab_size;
  }
  size_t budget =
      plan_memory(g, 7, Recompute::gelu, false, Precision::fp32, *make_backend("cpu")).total();
  c.recompute = Recompute::gelu;
  c.memory_budget = static_cast<int64_t>(budget);
  Trainer tr(c, d.file("run"), false, nullptr);
  EXPECT_EQ(tr.config().batch_size, 7);
  EXPECT_EQ(tr.model().memory().total(), budget);
  c.memory_budget = 1000;
  EXPECT_THROW(Trainer(c, d.file("run2"), false, nullptr), Error);
}

}  // namespace
}  // namespace gt
