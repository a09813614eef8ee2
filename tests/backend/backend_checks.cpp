// The op test's checks per backend (part of backend_ops_test; the table of op cases is
// test_backend_ops.cpp): every case of the table runs under fp32; gradients against central
// finite differences of the backend's own forward (fp32); NaN and infinity propagate where an
// op must let them through (the loss, the gradient norm that fp16's loss scaler reads, the row
// they sit in).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "op_cases.h"

namespace gt::test {
namespace {

std::vector<std::string> backend_names() {
  std::vector<std::string> v;
  for (auto& e : registered_backends()) v.push_back(e.name);
  return v;
}

class BackendOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    be = shared_backend(GetParam(), &why);
    if (!be) GTEST_SKIP() << why;
  }
  Backend* be = nullptr;
};

// Every case has a row under fp32 (the table leaves out what supports() refuses, so a backend
// that refused a case would otherwise lose it silently).
TEST_P(BackendOps, EveryCaseRunsUnderFp32) {
  for (const OpCase& c : op_cases())
    EXPECT_TRUE(supports_all(*be, c.ops, Precision::fp32))
        << c.name << ": " << be->name() << " does not run it under fp32";
}

// ---- gradients against finite differences -------------------------------------------------
struct GradCase {
  std::string name;
  std::vector<Op> ops;
  std::vector<std::vector<float>> inputs;  ///< host values; gradients are taken w.r.t. each
  /// The scalar L(inputs) = <r, forward(inputs)>, in double on the host.
  std::function<double(Ctx&, const std::vector<float*>&)> loss;
  /// dL/d(input k) for every k, from the backend's backward ops.
  std::function<std::vector<std::vector<float>>(Ctx&, const std::vector<float*>&)> grads;
};

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double)a[i] * b[i];
  return s;
}

std::vector<GradCase> grad_cases() {
  const int B = 2, T = 5, C = 12, NH = 3, V = 9;
  const int64_t N = B * T;
  std::vector<GradCase> g;
  {  // layernorm: x, w, b
    const auto r = normal(N * C, 100);
    auto fwd = [=](Ctx& x, const std::vector<float*>& in, float* out, float* mean, float* rstd) {
      x.be.layernorm_forward(out, mean, rstd, in[0], in[1], in[2], N, C);
    };
    g.push_back(
        {"layernorm",
         {Op::layernorm_forward, Op::layernorm_backward},
         {normal(N * C, 101, 2.0f), normal(C, 102, 0.5f, 1.0f), normal(C, 103)},
         [=](Ctx& x, const std::vector<float*>& in) {
           float *out = x.out(N * C), *mean = x.out(N), *rstd = x.out(N);
           fwd(x, in, out, mean, rstd);
           return dot(x.get(out, N * C), r);
         },
         [=](Ctx& x, const std::vector<float*>& in) {
           float *out = x.out(N * C), *mean = x.out(N), *rstd = x.out(N);
           fwd(x, in, out, mean, rstd);
           float *dx = x.out(N * C, 0), *dw = x.out(C, 0), *db = x.out(C, 0);
           x.be.layernorm_backward(dx, dw, db, x.in(r), in[0], in[1], mean, rstd, N, C);
           return std::vector<std::vector<float>>{x.get(dx, N * C), x.get(dw, C), x.get(db, C)};
         }});
  }
  for (bool wt : {false, true}) {  // matmul: x, w, bias
    const int OC = 7;
    const auto r = normal(N * OC, 110);
    g.push_back({wt ? "matmul wT" : "matmul",
                 {Op::matmul_forward, Op::matmul_backward},
                 {normal(N * C, 111), normal(C * OC, 112), normal(OC, 113)},
                 [=](Ctx& x, const std::vector<float*>& in) {
                   float* out = x.out(N * OC);
                   x.be.matmul_forward(out, in[0], in[1], in[2], N, C, OC, wt);
                   return dot(x.get(out, N * OC), r);
                 },
                 [=](Ctx& x, const std::vector<float*>& in) {
                   float *dx = x.out(N * C), *dw = x.out(C * OC, 0), *db = x.out(OC, 0);
                   x.be.matmul_backward(dx, dw, db, x.in(r), in[0], in[1], N, C, OC, wt);
                   return std::vector<std::vector<float>>{x.get(dx, N * C), x.get(dw, C * OC),
                                                          x.get(db, OC)};
                 }});
  }
  for (bool fused : {false, true}) {  // attention: qkv
    const auto r = normal(N * C, 120);
    auto fwd = [=](Ctx& x, const float* qkv, float* out, float* att) {
      if (fused)
        x.be.attention_forward_fused(out, att, qkv, B, T, C, NH);
      else
        x.be.attention_forward(out, att, qkv, B, T, C, NH);
    };
    const int64_t att_n = fused ? (int64_t)B * NH * T : (int64_t)B * NH * T * T;
    g.push_back({fused ? "attention fused" : "attention",
                 fused ? std::vector<Op>{Op::attention_forward_fused, Op::attention_backward_fused}
                       : std::vector<Op>{Op::attention_forward, Op::attention_backward},
                 {normal(N * 3 * C, 121)},
                 [=](Ctx& x, const std::vector<float*>& in) {
                   float *out = x.out(N * C), *att = x.out(att_n);
                   fwd(x, in[0], out, att);
                   return dot(x.get(out, N * C), r);
                 },
                 [=](Ctx& x, const std::vector<float*>& in) {
                   float *out = x.out(N * C), *att = x.out(att_n), *dqkv = x.out(N * 3 * C);
                   fwd(x, in[0], out, att);
                   if (fused)
                     x.be.attention_backward_fused(dqkv, x.in(r), in[0], out, att, B, T, C, NH);
                   else
                     x.be.attention_backward(dqkv, x.in(r), in[0], att, B, T, C, NH);
                   return std::vector<std::vector<float>>{x.get(dqkv, N * 3 * C)};
                 }});
  }
  {  // GELU, and the MLP's c_proj with GELU fused into its backward: pre-activation, weight
    const int H = 8, OC = 5;
    const auto r = normal(N * OC, 130);
    g.push_back({"gelu + matmul_backward_gelu",
                 {Op::gelu_forward_fused, Op::matmul_backward_gelu, Op::matmul_forward},
                 {normal(N * H, 131, 2.0f), normal(H * OC, 132)},
                 [=](Ctx& x, const std::vector<float*>& in) {
                   float *act = x.out(N * H), *out = x.out(N * OC);
                   x.be.gelu_forward_fused(act, nullptr, in[0], N * H);
                   x.be.matmul_forward(out, act, in[1], nullptr, N, H, OC, false);
                   return dot(x.get(out, N * OC), r);
                 },
                 [=](Ctx& x, const std::vector<float*>& in) {
                   float *act = x.out(N * H), *dg = x.out(N * H), *dpre = x.out(N * H);
                   float* dw = x.out(H * OC, 0);
                   x.be.gelu_forward_fused(act, dg, in[0], N * H);
                   x.be.matmul_backward_gelu(dpre, dw, nullptr, x.in(r), act, in[1], dg, N, H, OC);
                   return std::vector<std::vector<float>>{x.get(dpre, N * H), x.get(dw, H * OC)};
                 }});
  }
  for (bool fused : {false, true}) {  // cross-entropy: logits (L = sum of the losses)
    const auto tg = ids(N, V, 140);
    g.push_back({fused ? "softmax_crossentropy fused" : "softmax_crossentropy",
                 fused ? std::vector<Op>{Op::softmax_crossentropy_fused}
                       : std::vector<Op>{Op::softmax_crossentropy_forward,
                                         Op::softmax_crossentropy_backward},
                 {normal(N * V, 141, 2.0f)},
                 [=](Ctx& x, const std::vector<float*>& in) {
                   float *probs = x.out(N * V), *losses = x.out(N);
                   x.be.softmax_crossentropy_forward(probs, losses, in[0], x.in(tg), N, V);
                   double s = 0;
                   for (float l : x.get(losses, N)) s += l;
                   return s;
                 },
                 [=](Ctx& x, const std::vector<float*>& in) {
                   float *losses = x.out(N), *dl = x.out(N * V);
                   if (fused) {
                     x.be.copy_to_device(dl, x.get(in[0], N * V).data(), N * V * sizeof(float));
                     x.be.softmax_crossentropy_fused(dl, losses, x.in(tg), 1.0f, N, V);
                   } else {
                     float* probs = x.out(N * V);
                     x.be.softmax_crossentropy_forward(probs, losses, in[0], x.in(tg), N, V);
                     x.be.softmax_crossentropy_backward(dl, probs, x.in(tg), 1.0f, N, V);
                   }
                   return std::vector<std::vector<float>>{x.get(dl, N * V)};
                 }});
  }
  {  // embedding: wte, wpe
    const auto r = normal(N * C, 150);
    const auto inp = ids(N, V, 151);
    g.push_back({"embedding",
                 {Op::embedding_forward, Op::embedding_backward},
                 {normal(V * C, 152), normal(T * C, 153)},
                 [=](Ctx& x, const std::vector<float*>& in) {
                   float* out = x.out(N * C);
                   x.be.embedding_forward(out, x.in(inp), in[0], in[1], B, T, C);
                   return dot(x.get(out, N * C), r);
                 },
                 [=](Ctx& x, const std::vector<float*>& in) {
                   float *dwte = x.out(V * C, 0), *dwpe = x.out(T * C, 0);
                   x.be.embedding_backward(dwte, dwpe, x.in(r), x.in(inp), B, T, C);
                   return std::vector<std::vector<float>>{x.get(dwte, V * C), x.get(dwpe, T * C)};
                 }});
  }
  return g;
}

// Directional central differences: for a random direction u of each input,
// (L(x + h u) - L(x - h u)) / 2h against <dL/dx, u>, within 1% of |dL/dx| (float32 forward).
TEST_P(BackendOps, GradientsMatchFiniteDifferences) {
  if (!be->supports(Op::matmul_forward, Precision::fp32)) GTEST_SKIP() << "no fp32";
  be->set_precision(Precision::fp32);
  const double h = 1e-2;
  int checked = 0;
  for (const GradCase& gc : grad_cases()) {
    if (!supports_all(*be, gc.ops, Precision::fp32)) continue;
    auto with = [&](const std::vector<std::vector<float>>& host) {
      Ctx x(*be, Precision::fp32, false);
      std::vector<float*> in;
      for (auto& v : host) in.push_back(x.in(v));
      return gc.loss(x, in);
    };
    std::vector<std::vector<float>> grads;
    {
      Ctx x(*be, Precision::fp32, false);
      std::vector<float*> in;
      for (auto& v : gc.inputs) in.push_back(x.in(v));
      grads = gc.grads(x, in);
    }
    ASSERT_EQ(grads.size(), gc.inputs.size()) << gc.name;
    for (size_t k = 0; k < gc.inputs.size(); ++k)
      for (int dir = 0; dir < 3; ++dir) {
        const auto u = normal(gc.inputs[k].size(), 1000 + 10 * k + dir);
        auto plus = gc.inputs, minus = gc.inputs;
        for (size_t i = 0; i < u.size(); ++i) {
          plus[k][i] += static_cast<float>(h * u[i]);
          minus[k][i] -= static_cast<float>(h * u[i]);
        }
        const double fd = (with(plus) - with(minus)) / (2 * h);
        const double an = dot(grads[k], u);
        const double gnorm = std::sqrt(dot(grads[k], grads[k]));
        ++checked;
        EXPECT_NEAR(an, fd, 1e-2 * (std::fabs(an) + gnorm) + 1e-4)
            << gc.name << " on " << be->name() << ": input " << k << ", direction " << dir;
      }
  }
  EXPECT_EQ(checked, 3 * 17) << "every input of every gradient case, three directions";
}

// ---- NaN and infinity ---------------------------------------------------------------------
bool finite(const std::vector<float>& v, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i)
    if (!std::isfinite(v[i])) return false;
  return true;
}
bool none_finite(const std::vector<float>& v, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i)
    if (std::isfinite(v[i])) return false;
  return true;
}

TEST_P(BackendOps, NanAndInfinityPropagate) {
  const int N = 3, C = 20, V = 17, B = 1, T = 6, NH = 2;
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    if (!supports_all(*be, {Op::matmul_forward}, p)) continue;
    be->set_precision(p);
    const std::string where = be->name() + " under " + to_string(p);
    Ctx x(*be, p, false);
    for (float bad : {NAN, INFINITY}) {  // the gradient norm fp16's loss scaler reads
      auto g = normal(100000, 200);
      g[77777] = bad;
      EXPECT_FALSE(std::isfinite(be->sum_squares(x.in(g), (int64_t)g.size()))) << where;
    }
    auto poisoned = [](std::vector<float> v, size_t i) {
      v[i] = NAN;
      return v;
    };
    {  // cross-entropy: the loss of the row holding a NaN logit
      auto logits = poisoned(normal(N * V, 201), 1 * V + 4);
      auto tg = x.in(ids(N, V, 202));
      float *probs = x.out(N * V), *losses = x.out(N);
      be->softmax_crossentropy_forward(probs, losses, x.in(logits), tg, N, V);
      auto l = x.get(losses, N);
      EXPECT_FALSE(std::isfinite(l[1])) << where;
      EXPECT_TRUE(std::isfinite(l[0]) && std::isfinite(l[2])) << where;
      if (be->supports(Op::softmax_crossentropy_fused, p)) {
        float* lg = x.in(logits);
        be->softmax_crossentropy_fused(lg, losses, tg, 1.0f, N, V);
        EXPECT_FALSE(std::isfinite(x.get(losses, N)[1])) << where << " (fused)";
      }
    }
    {  // layernorm and a matrix product: the row
      auto in = x.in(poisoned(normal(N * C, 203), 1 * C + 3));
      float *out = x.out(N * C), *mean = x.out(N), *rstd = x.out(N);
      be->layernorm_forward(out, mean, rstd, in, x.in(normal(C, 204)), x.in(normal(C, 205)), N, C);
      auto o = x.get(out, N * C);
      EXPECT_TRUE(none_finite(o, C, 2 * C)) << where << ": layernorm";
      EXPECT_TRUE(finite(o, 0, C) && finite(o, 2 * C, 3 * C)) << where << ": layernorm";
      float* mm = x.out(N * 7);
      be->matmul_forward(mm, in, x.in(normal(C * 7, 206)), nullptr, N, C, 7, false);
      auto m = x.get(mm, N * 7);
      EXPECT_TRUE(none_finite(m, 7, 14)) << where << ": matmul";
      EXPECT_TRUE(finite(m, 0, 7) && finite(m, 14, 21)) << where << ": matmul";
    }
    {  // GELU: the element
      float* out = x.out(9);
      be->gelu_forward(out, x.in(poisoned(normal(9, 207), 4)), 9);
      auto o = x.get(out, 9);
      EXPECT_FALSE(std::isfinite(o[4])) << where << ": gelu";
      EXPECT_TRUE(finite(o, 0, 4) && finite(o, 5, 9)) << where << ": gelu";
    }
    {  // causal attention: a NaN query at t = 2 spoils row 2 of its head only
      const int hs = C / NH;
      auto qkv = x.in(poisoned(normal(B * T * 3 * C, 208), 2 * 3 * C + 1));  // q, head 0
      float *out = x.out(B * T * C), *att = x.out(B * NH * T * T);
      be->attention_forward(out, att, qkv, B, T, C, NH);
      auto o = x.get(out, B * T * C);
      EXPECT_TRUE(none_finite(o, 2 * C, 2 * C + hs)) << where << ": attention";
      EXPECT_TRUE(finite(o, 0, 2 * C) && finite(o, 3 * C, T * C)) << where << ": attention";
    }
    {  // AdamW: a NaN gradient is not hidden
      float *pp = x.in(normal(10, 209)), *m = x.out(10, 0), *v = x.out(10, 0);
      be->adamw_update(pp, x.in(poisoned(normal(10, 210), 6)), m, v, 10, 1e-3f, 0.9f, 0.95f, 1e-8f,
                       0.0f, 1);
      auto after = x.get(pp, 10);
      EXPECT_FALSE(std::isfinite(after[6])) << where << ": adamw";
      EXPECT_TRUE(finite(after, 0, 6)) << where << ": adamw";
    }
    EXPECT_EQ(x.broken_guards(), "") << where;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Registered, BackendOps, ::testing::ValuesIn(backend_names()),
    [](const auto& info) {  // test names take [A-Za-z0-9_]: cuda-emu -> cuda_emu
      std::string n = info.param;
      for (char& c : n)
        if (c == '-') c = '_';
      return n;
    });

}  // namespace
}  // namespace gt::test
