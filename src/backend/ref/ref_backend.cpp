// backend/ref/ref_backend.cpp: the reference backend, the definition of every op of
// backend.h. Plain single-threaded loops in float32 over float32 tensors, sums that decide
// accuracy (dot products, LayerNorm statistics, softmax normalisers, gradient norms) in
// double; no oneDNN, no SIMD intrinsics, no OpenMP, compiled without -ffast-math. Slow by
// design: every other backend is tested against it (tests/backend/test_backend_ops.cpp), and
// `train.device = ref` trains with it.
#include "backend/ref/ref_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace gt {
namespace {

constexpr double kLnEps = 1e-5;                      // torch.nn.LayerNorm's default
constexpr double kSqrt2OverPi = 0.7978845608028654;  // GELU tanh form
constexpr double kGeluCubic = 0.044715;

/// gelu(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016).
double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}
/// d gelu / dx.
double gelu_grad(double x) {
  const double t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5 * (1.0 + t) +
         0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * x * x);
}

/// W[c, o] of a (C, OC) weight, or of the (OC, C) layout when transposed.
inline float weight(const float* w, int64_t c, int64_t o, int C, int OC, bool transposed) {
  return transposed ? w[o * C + c] : w[c * OC + o];
}

/// The f32 elements of a tensor argument: the reference computes in fp32 only, so a bf16
/// tensor (DevPtr) is an error.
float* f32(DevPtr p) {
  check(!p.bf16(), "ref backend: a bf16 tensor argument; the reference computes in fp32 only");
  return p.f32();
}
const float* f32(ConstDevPtr p) {
  check(!p.bf16(), "ref backend: a bf16 tensor argument; the reference computes in fp32 only");
  return p.f32();
}

void check_targets(const int32_t* targets, int64_t N, int V) {
  for (int64_t i = 0; i < N; ++i)
    if (targets[i] < 0 || targets[i] >= V)
      throw Error(fmt::format("target token {} at row {} is outside the vocabulary [0, {})",
                              targets[i], i, V));
}

class RefBackend final : public HostMemoryBackend {
 public:
  std::string name() const override { return "ref"; }

  // ---- memory: host memory ------------------------------------------------------------
  /// Host memory, but declared not readable on the host: everything above the backend then
  /// takes the staged-copy paths a GPU backend needs (checkpoints, logits), and
  /// `train.device = ref` tests them on the CPU.
  bool host_readable() const override { return false; }

  bool supports(Op, Precision p) const override { return p == Precision::fp32; }
  size_t workspace_bytes(const WorkspaceQuery&) const override { return 0; }

  // ---- embedding ----------------------------------------------------------------------
  void embedding_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                         int T, int C) override {
    for (int64_t bt = 0; bt < (int64_t)B * T; ++bt) {
      const int64_t t = bt % T;
      for (int c = 0; c < C; ++c) out[bt * C + c] = wte[(int64_t)inp[bt] * C + c] + wpe[t * C + c];
    }
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                          int T, int C) override {
    for (int64_t bt = 0; bt < (int64_t)B * T; ++bt) {
      const int64_t t = bt % T;
      for (int c = 0; c < C; ++c) {
        dwte[(int64_t)inp[bt] * C + c] += dout[bt * C + c];
        dwpe[t * C + c] += dout[bt * C + c];
      }
    }
  }

  // ---- layernorm ----------------------------------------------------------------------
  void layernorm_forward(DevPtr out_, float* mean, float* rstd, const float* inp, const float* w,
                         const float* b, int64_t N, int C) override {
    float* out = f32(out_);
    for (int64_t i = 0; i < N; ++i) {
      const float* x = inp + i * C;
      double m = 0.0;
      for (int c = 0; c < C; ++c) m += x[c];
      m /= C;
      double v = 0.0;
      for (int c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
      v /= C;
      const double s = 1.0 / std::sqrt(v + kLnEps);
      for (int c = 0; c < C; ++c) out[i * C + c] = static_cast<float>((x[c] - m) * s * w[c] + b[c]);
      mean[i] = static_cast<float>(m);
      rstd[i] = static_cast<float>(s);
    }
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                          const float* w, const float* mean, const float* rstd, int64_t N,
                          int C) override {
    std::vector<double> dwsum(C, 0.0), dbsum(C, 0.0);
    for (int64_t i = 0; i < N; ++i) {
      const float* d = dout + i * C;
      const float* x = inp + i * C;
      const double m = mean[i], s = rstd[i];
      double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
      for (int c = 0; c < C; ++c) {
        const double dn = (double)w[c] * d[c];
        dnorm_mean += dn;
        dnorm_norm_mean += dn * (x[c] - m) * s;
      }
      dnorm_mean /= C;
      dnorm_norm_mean /= C;
      for (int c = 0; c < C; ++c) {
        const double norm = (x[c] - m) * s;
        dinp[i * C + c] +=
            static_cast<float>(((double)w[c] * d[c] - dnorm_mean - norm * dnorm_norm_mean) * s);
        dbsum[c] += d[c];
        dwsum[c] += norm * d[c];
      }
    }
    for (int c = 0; c < C; ++c) {
      dw[c] += static_cast<float>(dwsum[c]);
      db[c] += static_cast<float>(dbsum[c]);
    }
  }

  // ---- matrix products ----------------------------------------------------------------
  void matmul_forward(DevPtr out_, ConstDevPtr inp_, const float* w, const float* bias, int64_t N,
                      int C, int OC, bool w_transposed) override {
    float* out = f32(out_);
    const float* inp = f32(inp_);
    for (int64_t i = 0; i < N; ++i)
      for (int o = 0; o < OC; ++o) {
        double s = bias ? bias[o] : 0.0;
        for (int c = 0; c < C; ++c)
          s += (double)inp[i * C + c] * weight(w, c, o, C, OC, w_transposed);
        out[i * OC + o] = static_cast<float>(s);
      }
  }
  void matmul_gelu_forward(DevPtr out_, DevPtr pre_, ConstDevPtr inp, const float* w,
                           const float* bias, int64_t N, int C, int OC) override {
    float *out = f32(out_), *pre = f32(pre_);
    matmul_forward(out, inp, w, bias, N, C, OC, false);
    if (pre) std::copy(out, out + N * OC, pre);
    for (int64_t i = 0; i < N * OC; ++i) out[i] = static_cast<float>(gelu(out[i]));
  }
  void matmul_backward(float* dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                       const float* w, int64_t N, int C, int OC, bool w_transposed) override {
    matmul_backward_impl(dinp, dw, dbias, f32(dout), f32(inp), w, nullptr, N, C, OC, w_transposed);
  }
  void matmul_backward_gelu(DevPtr dinp, float* dw, float* dbias, ConstDevPtr dout, ConstDevPtr inp,
                            const float* w, ConstDevPtr gelu, GeluSaved saved, int64_t N, int C,
                            int OC) override {
    matmul_backward_impl(f32(dinp), dw, dbias, f32(dout), f32(inp), w, f32(gelu), N, C, OC, false,
                         saved);
  }
  /// dinp = dout @ W^T (times gelu' when gelu is not null: gelu itself, or gelu' of it under
  /// GeluSaved::input), dw += inp^T @ dout, dbias += sum of dout.
  void matmul_backward_impl(float* dinp, float* dw, float* dbias, const float* dout,
                            const float* inp, const float* w, const float* gelu, int64_t N, int C,
                            int OC, bool wt, GeluSaved saved = GeluSaved::derivative) {
    auto dgelu = [&](int64_t i) {
      return saved == GeluSaved::input ? gelu_grad(gelu[i]) : (double)gelu[i];
    };
    if (dinp)
      for (int64_t i = 0; i < N; ++i)
        for (int c = 0; c < C; ++c) {
          double s = 0.0;
          for (int o = 0; o < OC; ++o) s += (double)dout[i * OC + o] * weight(w, c, o, C, OC, wt);
          dinp[i * C + c] = static_cast<float>(gelu ? s * dgelu(i * C + c) : s);
        }
    for (int c = 0; c < C; ++c)
      for (int o = 0; o < OC; ++o) {
        double s = 0.0;
        for (int64_t i = 0; i < N; ++i) s += (double)inp[i * C + c] * dout[i * OC + o];
        float& g = wt ? dw[(int64_t)o * C + c] : dw[(int64_t)c * OC + o];
        g += static_cast<float>(s);
      }
    if (dbias)
      for (int o = 0; o < OC; ++o) {
        double s = 0.0;
        for (int64_t i = 0; i < N; ++i) s += dout[i * OC + o];
        dbias[o] += static_cast<float>(s);
      }
  }

  // ---- attention ----------------------------------------------------------------------
  // qkv (B,T,3C): q at [0,C), k at [C,2C), v at [2C,3C) of each row; head h uses channels
  // [h*hs, (h+1)*hs) of each. Causal: query t sees keys 0..t. Scale 1/sqrt(hs).

  /// Probabilities p[0..t] of query t of head h in batch b; returns the log-sum-exp of the
  /// scaled scores.
  double attention_row(double* p, const float* qkv, int b, int h, int t, int T, int C, int NH) {
    const int hs = C / NH;
    const double scale = 1.0 / std::sqrt((double)hs);
    const float* q = qkv + ((int64_t)b * T + t) * 3 * C + h * hs;
    double mx = -INFINITY;
    for (int t2 = 0; t2 <= t; ++t2) {
      const float* k = qkv + ((int64_t)b * T + t2) * 3 * C + C + h * hs;
      double d = 0.0;
      for (int i = 0; i < hs; ++i) d += (double)q[i] * k[i];
      p[t2] = d * scale;
      if (p[t2] > mx) mx = p[t2];
    }
    double z = 0.0;
    for (int t2 = 0; t2 <= t; ++t2) z += std::exp(p[t2] - mx);
    for (int t2 = 0; t2 <= t; ++t2) p[t2] = std::exp(p[t2] - mx) / z;
    return mx + std::log(z);
  }
  /// out row (b,t,h) = sum_t2 p[t2] v[t2].
  void attention_out(float* out, const double* p, const float* qkv, int b, int h, int t, int T,
                     int C, int NH) {
    const int hs = C / NH;
    for (int i = 0; i < hs; ++i) {
      double s = 0.0;
      for (int t2 = 0; t2 <= t; ++t2)
        s += p[t2] * qkv[((int64_t)b * T + t2) * 3 * C + 2 * C + h * hs + i];
      out[((int64_t)b * T + t) * C + h * hs + i] = static_cast<float>(s);
    }
  }
  /// The backward of one query row given its probabilities p[0..t]: dq, and dk, dv += .
  void attention_row_backward(float* dqkv, const double* p, const float* dout, const float* qkv,
                              int b, int h, int t, int T, int C, int NH) {
    const int hs = C / NH;
    const double scale = 1.0 / std::sqrt((double)hs);
    const float* d = dout + ((int64_t)b * T + t) * C + h * hs;
    std::vector<double> dp(t + 1);
    double sum_pdp = 0.0;
    for (int t2 = 0; t2 <= t; ++t2) {
      const float* v = qkv + ((int64_t)b * T + t2) * 3 * C + 2 * C + h * hs;
      double s = 0.0;
      for (int i = 0; i < hs; ++i) s += (double)d[i] * v[i];
      dp[t2] = s;
      sum_pdp += p[t2] * s;
    }
    const float* q = qkv + ((int64_t)b * T + t) * 3 * C + h * hs;
    float* dq = dqkv + ((int64_t)b * T + t) * 3 * C + h * hs;
    for (int t2 = 0; t2 <= t; ++t2) {
      const double ds = p[t2] * (dp[t2] - sum_pdp) * scale;  // softmax backward, then scale
      const int64_t row = ((int64_t)b * T + t2) * 3 * C;
      const float* k = qkv + row + C + h * hs;
      float* dk = dqkv + row + C + h * hs;
      float* dv = dqkv + row + 2 * C + h * hs;
      for (int i = 0; i < hs; ++i) {
        dq[i] += static_cast<float>(ds * k[i]);
        dk[i] += static_cast<float>(ds * q[i]);
        dv[i] += static_cast<float>(p[t2] * d[i]);
      }
    }
  }

  void attention_forward(DevPtr out_, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    float* out = f32(out_);
    std::vector<double> p(T);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int t = 0; t < T; ++t) {
          attention_row(p.data(), qkv, b, h, t, T, C, NH);
          float* a = att + (((int64_t)b * NH + h) * T + t) * T;
          for (int t2 = 0; t2 < T; ++t2) a[t2] = t2 <= t ? static_cast<float>(p[t2]) : 0.0f;
          attention_out(out, p.data(), qkv, b, h, t, T, C, NH);
        }
  }
  void attention_backward(DevPtr dqkv_, const float* dout, const float* qkv, const float* att,
                          int B, int T, int C, int NH) override {
    float* dqkv = f32(dqkv_);
    std::memset(dqkv, 0, sizeof(float) * B * T * 3 * C);
    std::vector<double> p(T);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int t = 0; t < T; ++t) {
          const float* a = att + (((int64_t)b * NH + h) * T + t) * T;
          for (int t2 = 0; t2 <= t; ++t2) p[t2] = a[t2];
          attention_row_backward(dqkv, p.data(), dout, qkv, b, h, t, T, C, NH);
        }
  }
  void attention_forward_fused(DevPtr out_, float* lse, ConstDevPtr qkv_, int B, int T, int C,
                               int NH) override {
    float* out = f32(out_);
    const float* qkv = f32(qkv_);
    std::vector<double> p(T);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int t = 0; t < T; ++t) {
          lse[((int64_t)b * NH + h) * T + t] =
              static_cast<float>(attention_row(p.data(), qkv, b, h, t, T, C, NH));
          attention_out(out, p.data(), qkv, b, h, t, T, C, NH);
        }
  }
  void attention_backward_fused(DevPtr dqkv_, const float* dout, ConstDevPtr qkv_, ConstDevPtr out,
                                const float* lse, int B, int T, int C, int NH) override {
    (void)out;
    float* dqkv = f32(dqkv_);
    const float* qkv = f32(qkv_);
    std::memset(dqkv, 0, sizeof(float) * B * T * 3 * C);
    std::vector<double> p(T);
    const int hs = C / NH;
    const double scale = 1.0 / std::sqrt((double)hs);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int t = 0; t < T; ++t) {
          // p = exp(score - lse), from the forward's log-sum-exp
          const double l = lse[((int64_t)b * NH + h) * T + t];
          const float* q = qkv + ((int64_t)b * T + t) * 3 * C + h * hs;
          for (int t2 = 0; t2 <= t; ++t2) {
            const float* k = qkv + ((int64_t)b * T + t2) * 3 * C + C + h * hs;
            double d = 0.0;
            for (int i = 0; i < hs; ++i) d += (double)q[i] * k[i];
            p[t2] = std::exp(d * scale - l);
          }
          attention_row_backward(dqkv, p.data(), dout, qkv, b, h, t, T, C, NH);
        }
  }

  // ---- element-wise -------------------------------------------------------------------
  void gelu_forward(DevPtr out_, const float* inp, int64_t N) override {
    float* out = f32(out_);
    for (int64_t i = 0; i < N; ++i) out[i] = static_cast<float>(gelu(inp[i]));
  }
  void gelu_backward(DevPtr dinp_, const float* inp, const float* dout, int64_t N) override {
    float* dinp = f32(dinp_);
    for (int64_t i = 0; i < N; ++i) dinp[i] = static_cast<float>(gelu_grad(inp[i]) * dout[i]);
  }
  void gelu_forward_fused(DevPtr out_, DevPtr dgelu_, const float* inp, int64_t N) override {
    float *out = f32(out_), *dgelu = f32(dgelu_);
    for (int64_t i = 0; i < N; ++i) {
      const float x = inp[i];
      out[i] = static_cast<float>(gelu(x));
      if (dgelu) dgelu[i] = static_cast<float>(gelu_grad(x));
    }
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t N) override {
    for (int64_t i = 0; i < N; ++i) out[i] = a[i] + b[i];
  }
  void residual_layernorm_forward(float* res, DevPtr out, float* mean, float* rstd, const float* a,
                                  const float* b, const float* w, const float* bias, int64_t N,
                                  int C) override {
    residual_forward(res, a, b, N * C);
    layernorm_forward(out, mean, rstd, res, w, bias, N, C);
  }

  // ---- loss ---------------------------------------------------------------------------
  /// Log-sum-exp of one row of logits.
  static double row_lse(const float* l, int V) {
    double mx = -INFINITY;
    for (int j = 0; j < V; ++j) mx = l[j] > mx ? l[j] : mx;
    double z = 0.0;
    for (int j = 0; j < V; ++j) z += std::exp(l[j] - mx);
    return mx + std::log(z);
  }
  void softmax_crossentropy_forward(float* probs, float* losses, const float* logits,
                                    const int32_t* targets, int64_t N, int V) override {
    check_targets(targets, N, V);
    for (int64_t i = 0; i < N; ++i) {
      const float* l = logits + i * V;
      const double lse = row_lse(l, V);
      for (int j = 0; j < V; ++j) probs[i * V + j] = static_cast<float>(std::exp(l[j] - lse));
      losses[i] = static_cast<float>(lse - l[targets[i]]);
    }
  }
  void softmax_crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets,
                                     float dloss, int64_t N, int V) override {
    for (int64_t i = 0; i < N; ++i)
      for (int j = 0; j < V; ++j)
        dlogits[i * V + j] = (probs[i * V + j] - (j == targets[i] ? 1.0f : 0.0f)) * dloss;
  }
  void softmax_crossentropy_fused(DevPtr logits_, float* losses, const int32_t* targets,
                                  float dloss, int64_t N, int V) override {
    float* logits = f32(logits_);
    check_targets(targets, N, V);
    for (int64_t i = 0; i < N; ++i) {
      float* l = logits + i * V;
      const double lse = row_lse(l, V);
      losses[i] = static_cast<float>(lse - l[targets[i]]);
      for (int j = 0; j < V; ++j)
        l[j] = static_cast<float>((std::exp(l[j] - lse) - (j == targets[i] ? 1.0 : 0.0)) * dloss);
    }
  }

  // ---- optimizer ----------------------------------------------------------------------
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                    float beta2, float eps, float weight_decay, int64_t t) override {
    adamw(p, g, m, v, n, 1.0f, lr, beta1, beta2, eps, weight_decay, t);
  }
  void adamw_fused(float* const* p, const float* const* g, float* const* m, float* const* v,
                   const int64_t* n, const float* wd, int count, float grad_mult, float lr,
                   float beta1, float beta2, float eps, int64_t t) override {
    for (int i = 0; i < count; ++i)
      adamw(p[i], g[i], m[i], v[i], n[i], grad_mult, lr, beta1, beta2, eps, wd[i], t);
  }
  /// AdamW (Loshchilov & Hutter 2019, as torch.optim.AdamW) on g * grad_mult.
  static void adamw(float* p, const float* g, float* m, float* v, int64_t n, float grad_mult,
                    float lr, float beta1, float beta2, float eps, float wd, int64_t t) {
    const double bc1 = 1.0 - std::pow((double)beta1, (double)t);
    const double bc2 = 1.0 - std::pow((double)beta2, (double)t);
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i] * grad_mult;
      m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
      v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
      const double denom = std::sqrt((double)v[i]) / std::sqrt(bc2) + eps;
      p[i] = static_cast<float>(p[i] * (1.0 - (double)lr * wd) - lr / bc1 * m[i] / denom);
    }
  }
  double sum_squares(const float* g, int64_t n) override {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += (double)g[i] * g[i];
    return s;
  }
  void scale(DevPtr g_, float s, int64_t n) override {
    float* g = f32(g_);
    for (int64_t i = 0; i < n; ++i) g[i] *= s;
  }

  // ---- precision policy: fp32 only ----------------------------------------------------
  void set_precision(Precision p) override {
    if (p != Precision::fp32)
      throw Error(fmt::format(
          "train.precision = '{}': the ref backend (train.device = ref) computes in fp32 only",
          to_string(p)));
  }
  Precision precision() const override { return Precision::fp32; }
  void set_stochastic_rounding(bool, uint64_t) override {}  // no 16-bit copies to round
  void weights_updated() override {}
};

}  // namespace

std::unique_ptr<Backend> make_ref_backend(int index, const BackendOptions&) {
  check(index == 0, "ref backend: there is one reference device (index 0)");
  return std::make_unique<RefBackend>();
}

}  // namespace gt
