// Every kernel of every registered backend (the reference backend included: these float64
// formulas are its independent check) against a float64 reference: forwards compared
// elementwise, backwards compared with central finite differences of the float64 reference
// forward. tests/backend/test_backend_ops.cpp compares the backends with each other at many
// more sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "test_helpers.h"

namespace gt {
namespace {

using test::randn;

using Vec = std::vector<double>;

Vec to_d(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

// ---- float64 references -------------------------------------------------------------
Vec ref_layernorm(const Vec& x, const Vec& w, const Vec& b, int N, int C) {
  Vec out(x.size());
  for (int i = 0; i < N; ++i) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += x[i * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (x[i * C + c] - m) * (x[i * C + c] - m);
    v /= C;
    double s = 1.0 / std::sqrt(v + 1e-5);
    for (int c = 0; c < C; ++c) out[i * C + c] = (x[i * C + c] - m) * s * w[c] + b[c];
  }
  return out;
}
Vec ref_matmul(const Vec& x, const Vec& w, const Vec& b, int N, int C, int OC, bool wt) {
  Vec out((size_t)N * OC);
  for (int i = 0; i < N; ++i)
    for (int o = 0; o < OC; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (int c = 0; c < C; ++c) s += x[i * C + c] * (wt ? w[o * C + c] : w[c * OC + o]);
      out[i * OC + o] = s;
    }
  return out;
}
Vec ref_attention(const Vec& qkv, int B, int T, int C, int NH) {
  int hs = C / NH;
  Vec out((size_t)B * T * C, 0.0);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        Vec s(t + 1);
        double mx = -1e300;
        for (int t2 = 0; t2 <= t; ++t2) {
          double d = 0;
          for (int i = 0; i < hs; ++i)
            d += qkv[(b * T + t) * 3 * C + h * hs + i] * qkv[(b * T + t2) * 3 * C + C + h * hs + i];
          s[t2] = d / std::sqrt((double)hs);
          mx = std::max(mx, s[t2]);
        }
        double z = 0;
        for (auto& e : s) z += (e = std::exp(e - mx));
        for (int t2 = 0; t2 <= t; ++t2)
          for (int i = 0; i < hs; ++i)
            out[(b * T + t) * C + h * hs + i] +=
                s[t2] / z * qkv[(b * T + t2) * 3 * C + 2 * C + h * hs + i];
      }
  return out;
}
double ref_gelu(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
Vec ref_xent(const Vec& logits, const std::vector<int32_t>& tg, int N, int V) {
  Vec l(N);
  for (int i = 0; i < N; ++i) {
    double mx = -1e300, z = 0;
    for (int j = 0; j < V; ++j) mx = std::max(mx, logits[i * V + j]);
    for (int j = 0; j < V; ++j) z += std::exp(logits[i * V + j] - mx);
    l[i] = std::log(z) + mx - logits[i * V + tg[i]];
  }
  return l;
}

// Central finite difference of f (a scalar of x) w.r.t. every element of x.
Vec fd_grad(Vec x, const std::function<double(const Vec&)>& f, double h = 1e-5) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double o = x[i];
    x[i] = o + h;
    double fp = f(x);
    x[i] = o - h;
    double fm = f(x);
    x[i] = o;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}
double dot(const Vec& a, const Vec& r) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * r[i];
  return s;
}
template <typename A, typename B>
void expect_close(const A& got, const B& want, double atol, double rtol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << what << " at " << i;
}

/// The host-memory backends: these cases hand host pointers to the ops. The CUDA backend's
/// ops (on a GPU, and on the SIMT runtime as cuda-emu, whose kernels refuse host pointers) are
/// tested through device copies by backend_ops_test.
std::vector<std::string> backends() {
  std::vector<std::string> v;
  for (auto& e : registered_backends()) {
    const std::string name = e.name;
    // an indexed device is a GPU (which this machine may lack): not made here
    if (device_traits(name).indexed || make_backend(name)->device() != Device::cpu) continue;
    v.push_back(name);
  }
  return v;
}

/// The backend under test is the first parameter of every case.
template <typename P>
class OnBackend : public ::testing::TestWithParam<P> {
 protected:
  static const std::string& name_of(const std::string& p) { return p; }
  template <typename T>
  static const std::string& name_of(const std::tuple<std::string, T>& p) {
    return std::get<0>(p);
  }
  std::unique_ptr<Backend> be = make_backend(name_of(this->GetParam()));
};
class Kernels : public OnBackend<std::string> {};
INSTANTIATE_TEST_SUITE_P(
    Registered, Kernels, ::testing::ValuesIn(backends()),
    [](const auto& info) {  // test names take [A-Za-z0-9_]: cuda-emu -> cuda_emu
      std::string n = info.param;
      for (char& c : n)
        if (c == '-') c = '_';
      return n;
    });

TEST_P(Kernels, EmbeddingForwardBackward) {
  const int B = 2, T = 3, C = 5, V = 7;
  auto wte = randn(V * C, 1), wpe = randn(T * C, 2), dout = randn(B * T * C, 3);
  std::vector<int32_t> inp = {0, 3, 6, 3, 3, 1};
  std::vector<float> out(B * T * C), dwte(V * C, 0), dwpe(T * C, 0);
  be->embedding_forward(out.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
  be->embedding_backward(dwte.data(), dwpe.data(), dout.data(), inp.data(), B, T, C);
  Vec want(B * T * C), dwte_ref(V * C, 0), dwpe_ref(T * C, 0);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c) {
        int i = (b * T + t) * C + c;
        want[i] = (double)wte[inp[b * T + t] * C + c] + wpe[t * C + c];
        dwte_ref[inp[b * T + t] * C + c] += dout[i];
        dwpe_ref[t * C + c] += dout[i];
      }
  expect_close(out, want, 1e-6, 1e-6, "out");
  expect_close(dwte, dwte_ref, 1e-5, 1e-5, "dwte");
  expect_close(dwpe, dwpe_ref, 1e-5, 1e-5, "dwpe");
}

// N = 150: three blocks of layernorm_backward's partial sums (64, 64, 22 rows)
class LayerNormRows : public OnBackend<std::tuple<std::string, int>> {};

TEST_P(LayerNormRows, ForwardBackward) {
  const int N = std::get<1>(GetParam()), C = 16;
  auto x = randn(N * C, 4, 2.0f), w = randn(C, 5), b = randn(C, 6), r = randn(N * C, 7);
  std::vector<float> out(N * C), mean(N), rstd(N);
  be->layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  expect_close(out, ref_layernorm(to_d(x), to_d(w), to_d(b), N, C), 1e-5, 1e-5, "out");
  std::vector<float> dx(N * C, 0), dw(C, 0), db(C, 0);
  be->layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(),
                         rstd.data(), N, C);
  Vec R = to_d(r);
  auto fx = [&](const Vec& xx) { return dot(ref_layernorm(xx, to_d(w), to_d(b), N, C), R); };
  auto fw = [&](const Vec& ww) { return dot(ref_layernorm(to_d(x), ww, to_d(b), N, C), R); };
  auto fb = [&](const Vec& bb) { return dot(ref_layernorm(to_d(x), to_d(w), bb, N, C), R); };
  expect_close(dx, fd_grad(to_d(x), fx), 1e-4, 1e-3, "dx");
  expect_close(dw, fd_grad(to_d(w), fw), 1e-4, 1e-3, "dw");
  expect_close(db, fd_grad(to_d(b), fb), 1e-4, 1e-3, "db");
}

INSTANTIATE_TEST_SUITE_P(Rows, LayerNormRows,
                         ::testing::Combine(::testing::ValuesIn(backends()),
                                            ::testing::Values(6, 150)));

class MatmulLayout : public OnBackend<std::tuple<std::string, bool>> {};

TEST_P(MatmulLayout, ForwardBackward) {
  const bool wt = std::get<1>(GetParam());
  const int N = 5, C = 12, OC = 7;
  auto x = randn(N * C, 8), w = randn(C * OC, 9), b = randn(OC, 10), r = randn(N * OC, 11);
  std::vector<float> out(N * OC);
  be->matmul_forward(out.data(), x.data(), w.data(), b.data(), N, C, OC, wt);
  expect_close(out, ref_matmul(to_d(x), to_d(w), to_d(b), N, C, OC, wt), 1e-5, 1e-5, "out");
  std::vector<float> dx(N * C, 123.0f), dw(C * OC, 0), db(OC, 0);  // dx is assigned: garbage ok
  be->matmul_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), N, C, OC, wt);
  Vec R = to_d(r);
  auto fx = [&](const Vec& v) { return dot(ref_matmul(v, to_d(w), to_d(b), N, C, OC, wt), R); };
  auto fw = [&](const Vec& v) { return dot(ref_matmul(to_d(x), v, to_d(b), N, C, OC, wt), R); };
  auto fb = [&](const Vec& v) { return dot(ref_matmul(to_d(x), to_d(w), v, N, C, OC, wt), R); };
  expect_close(dx, fd_grad(to_d(x), fx), 1e-4, 1e-4, "dx");
  expect_close(dw, fd_grad(to_d(w), fw), 1e-4, 1e-4, "dw");
  expect_close(db, fd_grad(to_d(b), fb), 1e-4, 1e-4, "db");
  // parameter gradients accumulate
  std::vector<float> dw2 = dw;
  be->matmul_backward(dx.data(), dw2.data(), nullptr, r.data(), x.data(), w.data(), N, C, OC, wt);
  for (size_t i = 0; i < dw.size(); ++i) ASSERT_NEAR(dw2[i], 2 * dw[i], 1e-5);
}
INSTANTIATE_TEST_SUITE_P(Layouts, MatmulLayout,
                         ::testing::Combine(::testing::ValuesIn(backends()),
                                            ::testing::Values(false, true)));

TEST_P(Kernels, AttentionForwardBackward) {
  const int B = 2, T = 5, C = 8, NH = 2;
  auto qkv = randn(B * T * 3 * C, 12), r = randn(B * T * C, 13);
  std::vector<float> out(B * T * C), att(B * NH * T * T), dqkv(B * T * 3 * C, 7.0f);
  be->attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  expect_close(out, ref_attention(to_d(qkv), B, T, C, NH), 1e-5, 1e-5, "out");
  // causal: probabilities above the diagonal are zero, each row sums to one
  for (int bh = 0; bh < B * NH; ++bh)
    for (int t = 0; t < T; ++t) {
      double s = 0;
      for (int t2 = 0; t2 < T; ++t2) {
        float p = att[(bh * T + t) * T + t2];
        if (t2 > t) {
          ASSERT_EQ(p, 0.0f);
        }
        s += p;
      }
      ASSERT_NEAR(s, 1.0, 1e-5);
    }
  be->attention_backward(dqkv.data(), r.data(), qkv.data(), att.data(), B, T, C, NH);
  Vec R = to_d(r);
  auto f = [&](const Vec& v) { return dot(ref_attention(v, B, T, C, NH), R); };
  expect_close(dqkv, fd_grad(to_d(qkv), f), 1e-4, 1e-3, "dqkv");
}

TEST_P(Kernels, GeluForwardBackward) {
  const int N = 50;
  auto x = randn(N, 14, 3.0f), r = randn(N, 15);
  std::vector<float> out(N), dx(N);
  be->gelu_forward(out.data(), x.data(), N);
  for (int i = 0; i < N; ++i) ASSERT_NEAR(out[i], ref_gelu(x[i]), 1e-6 + 1e-6 * std::fabs(out[i]));
  be->gelu_backward(dx.data(), x.data(), r.data(), N);
  for (int i = 0; i < N; ++i) {
    double h = 1e-5, fd = (ref_gelu(x[i] + h) - ref_gelu(x[i] - h)) / (2 * h) * r[i];
    ASSERT_NEAR(dx[i], fd, 1e-5 + 1e-4 * std::fabs(fd)) << i;
  }
}

TEST_P(Kernels, ResidualForward) {
  auto a = randn(33, 16), b = randn(33, 17);
  std::vector<float> out(33);
  be->residual_forward(out.data(), a.data(), b.data(), 33);
  for (int i = 0; i < 33; ++i) ASSERT_NEAR(out[i], (double)a[i] + b[i], 1e-6);
}

TEST_P(Kernels, SoftmaxCrossEntropyForwardBackward) {
  const int N = 4, V = 9;
  auto logits = randn(N * V, 18, 3.0f);
  std::vector<int32_t> tg = {0, 8, 3, 3};
  std::vector<float> probs(N * V), losses(N), dl(N * V);
  be->softmax_crossentropy_forward(probs.data(), losses.data(), logits.data(), tg.data(), N, V);
  expect_close(losses, ref_xent(to_d(logits), tg, N, V), 1e-5, 1e-5, "losses");
  const float dloss = 1.0f / N;
  be->softmax_crossentropy_backward(dl.data(), probs.data(), tg.data(), dloss, N, V);
  auto f = [&](const Vec& v) {
    double s = 0;
    for (double x : ref_xent(v, tg, N, V)) s += x;
    return s / N;
  };
  expect_close(dl, fd_grad(to_d(logits), f), 1e-5, 1e-4, "dlogits");
  std::vector<int32_t> bad = {0, 9, 0, 0};
  EXPECT_THROW(be->softmax_crossentropy_forward(probs.data(), losses.data(), logits.data(),
                                                bad.data(), N, V),
               std::exception);
  std::vector<int32_t> negative = {0, 0, -1, 0};
  try {
    be->softmax_crossentropy_fused(logits.data(), losses.data(), negative.data(), dloss, N, V);
    ADD_FAILURE() << "a negative target was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target token -1 at row 2"), std::string::npos)
        << e.what();
  }
}

TEST_P(Kernels, AdamWMatchesFloat64Formula) {
  const int n = 40;
  auto p = randn(n, 19), g = randn(n, 20);
  std::vector<float> m(n, 0), v(n, 0);
  Vec P = to_d(p), M(n, 0), Vv(n, 0);
  const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  for (int t = 1; t <= 3; ++t) {
    be->adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, t);
    for (int i = 0; i < n; ++i) {
      P[i] *= 1 - lr * wd;
      M[i] = b1 * M[i] + (1 - b1) * g[i];
      Vv[i] = b2 * Vv[i] + (1 - b2) * (double)g[i] * g[i];
      double mh = M[i] / (1 - std::pow(b1, t)), vh = Vv[i] / (1 - std::pow(b2, t));
      P[i] -= lr * mh / (std::sqrt(vh) + eps);
    }
  }
  expect_close(p, P, 1e-6, 1e-5, "params");
  expect_close(m, M, 1e-7, 1e-5, "exp_avg");
}

TEST_P(Kernels, SumSquaresAndScale) {
  const int n = 200000;  // spans several reduction chunks
  auto g = randn(n, 21);
  double want = 0;
  for (float x : g) want += (double)x * x;
  EXPECT_NEAR(be->sum_squares(g.data(), n), want, 1e-9 * want);
  be->scale(g.data(), 0.5f, n);
  double after = be->sum_squares(g.data(), n);
  EXPECT_NEAR(after, want / 4, 1e-9 * want);
}

}  // namespace
}  // namespace gt
