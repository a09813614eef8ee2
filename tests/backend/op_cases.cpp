// The op cases of the backend op test (op_cases.h). Every case builds its inputs from fixed
// seeds, calls its op once through Ctx::call (the call the timing mode times) and returns host
// copies of what the op wrote. Outputs that the op assigns start as NaN, so an element it
// skips shows; outputs it accumulates into (+=) start from random values.
#include "op_cases.h"

#include <map>

#include "core/error.h"

namespace gt::test {
namespace {

using V = std::vector<float>;

std::string dims_str(const Dims& d) {
  return fmt::format("{} B={} T={} C={} NH={} V={}", d.label, d.B, d.T, d.C, d.NH, d.V);
}

// ---- embedding, layernorm, residual -----------------------------------------------------
void add_embedding(std::vector<OpCase>& cs, const Dims& d) {
  const int64_t N = d.N(), C = d.C;
  cs.push_back({"embedding_forward " + dims_str(d), {Op::embedding_forward}, [d, N, C](Ctx& x) {
                  auto inp = x.in(ids(N, d.V, 1));
                  auto wte = x.in(normal(d.V * C, 2)), wpe = x.in(normal(d.T * C, 3));
                  float* out = x.out(N * C);
                  x.call([&] { x.be.embedding_forward(out, inp, wte, wpe, d.B, d.T, d.C); });
                  Outputs o;
                  o.add("out", x.get(out, N * C));
                  return o;
                }});
  cs.back().bytes = 3.0 * N * C * 4;
  cs.push_back({"embedding_backward " + dims_str(d), {Op::embedding_backward}, [d, N, C](Ctx& x) {
                  auto inp = x.in(ids(N, d.V, 1));
                  auto dout = x.in(normal(N * C, 4));
                  float* dwte = x.in(normal(d.V * C, 5));  // accumulated into
                  float* dwpe = x.in(normal(d.T * C, 6));
                  x.call([&] { x.be.embedding_backward(dwte, dwpe, dout, inp, d.B, d.T, d.C); });
                  Outputs o;
                  o.add("dwte", x.get(dwte, d.V * C));
                  o.add("dwpe", x.get(dwpe, d.T * C));
                  return o;
                }});
  cs.back().bytes = 5.0 * N * C * 4;
}

void add_layernorm(std::vector<OpCase>& cs, const Dims& d) {
  const int64_t N = d.N();
  const int C = d.C;
  auto forward = [N, C](Ctx& x, float* out, float* mean, float* rstd, const float* inp,
                        bool timed) {
    auto w = x.in(normal(C, 11, 0.5f, 1.0f)), b = x.in(normal(C, 12, 0.2f));
    auto f = [&] { x.be.layernorm_forward(out, mean, rstd, inp, w, b, N, C); };
    if (timed)
      x.call(f);
    else
      f();
  };
  cs.push_back({"layernorm_forward " + dims_str(d), {Op::layernorm_forward}, [=](Ctx& x) {
                  auto inp = x.in(normal(N * C, 10, 2.0f, 0.5f));
                  float *out = x.out(N * C), *mean = x.out(N), *rstd = x.out(N);
                  forward(x, out, mean, rstd, inp, true);
                  Outputs o;
                  o.add("out", x.get(out, N * C));
                  o.add("mean", x.get(mean, N));
                  o.add("rstd", x.get(rstd, N));
                  return o;
                }});
  cs.back().bytes = 2.0 * N * C * 4;
  cs.push_back(
      {"layernorm_backward " + dims_str(d),
       {Op::layernorm_forward, Op::layernorm_backward},
       [=](Ctx& x) {
         auto inp = x.in(normal(N * C, 10, 2.0f, 0.5f));
         float *out = x.out(N * C), *mean = x.out(N), *rstd = x.out(N);
         forward(x, out, mean, rstd, inp, false);
         auto w = x.in(normal(C, 11, 0.5f, 1.0f));
         auto dout = x.in(normal(N * C, 13));
         float* dinp = x.in(normal(N * C, 14));  // accumulated into
         float *dw = x.in(normal(C, 15)), *db = x.in(normal(C, 16));
         x.call([&] { x.be.layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C); });
         Outputs o;
         o.add("dinp", x.get(dinp, N * C));
         o.add("dw", x.get(dw, C));
         o.add("db", x.get(db, C));
         return o;
       }});
  cs.back().bytes = 4.0 * N * C * 4;
  // fused: res = a + b and layernorm(res) in one pass, against the two ops
  auto rl = [=](Ctx& x, bool fused) {
    auto a = x.in(normal(N * C, 17)), b = x.in(normal(N * C, 18, 1.5f));
    auto w = x.in(normal(C, 11, 0.5f, 1.0f)), bias = x.in(normal(C, 12, 0.2f));
    float *res = x.out(N * C), *out = x.out(N * C), *mean = x.out(N), *rstd = x.out(N);
    if (fused) {
      x.call([&] { x.be.residual_layernorm_forward(res, out, mean, rstd, a, b, w, bias, N, C); });
    } else {
      x.be.residual_forward(res, a, b, N * C);
      x.be.layernorm_forward(out, mean, rstd, res, w, bias, N, C);
    }
    Outputs o;
    o.add("res", x.get(res, N * C));
    o.add("out", x.get(out, N * C));
    o.add("mean", x.get(mean, N));
    o.add("rstd", x.get(rstd, N));
    return o;
  };
  cs.push_back({"residual_layernorm_forward vs residual+layernorm " + dims_str(d),
                {Op::residual_layernorm_forward},
                [=](Ctx& x) { return rl(x, true); },
                [=](Ctx& x) { return rl(x, false); }});
  cs.back().bytes = 4.0 * N * C * 4;
  cs.push_back({"residual_forward " + dims_str(d), {Op::residual_forward}, [=](Ctx& x) {
                  const int64_t n = N * C + 3;  // not a multiple of a vector
                  auto a = x.in(normal(n, 19)), b = x.in(normal(n, 20));
                  float* out = x.out(n);
                  x.call([&] { x.be.residual_forward(out, a, b, n); });
                  Outputs o;
                  o.add("out", x.get(out, n));
                  return o;
                }});
  cs.back().bytes = 3.0 * N * C * 4;
}

// ---- matrix products ----------------------------------------------------------------------
void add_matmul(std::vector<OpCase>& cs, const Dims& d) {
  const int64_t N = d.N();
  // (C, OC): the qkv product, and the tied classifier (V, C) transposed
  struct Mm {
    int C, OC;
    bool wt, bias;
  };
  for (Mm m : {Mm{d.C, 3 * d.C, false, true}, Mm{d.C, d.V, true, false}}) {
    const std::string what =
        fmt::format("{} N={} C={} OC={}{}", m.wt ? "wT" : "w", N, m.C, m.OC, m.bias ? " bias" : "");
    cs.push_back({"matmul_forward " + what + " " + d.label, {Op::matmul_forward}, [=](Ctx& x) {
                    auto inp = x.in(normal(N * m.C, 21)), w = x.in(normal(m.C * m.OC, 22, 0.1f));
                    const float* bias = m.bias ? x.in(normal(m.OC, 23)) : nullptr;
                    float* out = x.out(N * m.OC);
                    x.call([&] { x.be.matmul_forward(out, inp, w, bias, N, m.C, m.OC, m.wt); });
                    Outputs o;
                    o.add("out", x.get(out, N * m.OC));
                    return o;
                  }});
    cs.back().flops = 2.0 * N * m.C * m.OC;
    for (bool with_dinp : {true, false}) {
      if (!with_dinp && d.label != std::string("odd")) continue;
      cs.push_back(
          {fmt::format("matmul_backward {}{} {}", what, with_dinp ? "" : " dinp=null", d.label),
           {Op::matmul_backward},
           [=](Ctx& x) {
             auto inp = x.in(normal(N * m.C, 21)), w = x.in(normal(m.C * m.OC, 22, 0.1f));
             auto dout = x.in(normal(N * m.OC, 24));
             float* dinp = with_dinp ? x.out(N * m.C) : nullptr;  // assigned
             float* dw = x.in(normal(m.C * m.OC, 25));            // accumulated into
             float* db = m.bias ? x.in(normal(m.OC, 26)) : nullptr;
             x.call([&] { x.be.matmul_backward(dinp, dw, db, dout, inp, w, N, m.C, m.OC, m.wt); });
             Outputs o;
             if (dinp) o.add("dinp", x.get(dinp, N * m.C));
             o.add("dw", x.get(dw, (int64_t)m.C * m.OC));
             if (db) o.add("dbias", x.get(db, m.OC));
             return o;
           }});
      cs.back().flops = (with_dinp ? 4.0 : 2.0) * N * m.C * m.OC;
    }
  }
  // the MLP's GELU fused into its products, against matmul + gelu
  const int C = d.C, H = 4 * d.C;
  // with_pre: the pre-activation written too (for a backward with GeluSaved::input)
  auto mg = [=](Ctx& x, bool fused, bool with_pre) {
    auto inp = x.in(normal(N * C, 27)), w = x.in(normal(C * H, 28, 0.2f)),
         b = x.in(normal(H, 29, 0.5f));
    float *out = x.out(N * H), *pre = x.out(N * H);
    if (fused) {
      x.call([&] {
        if (with_pre)
          x.be.matmul_gelu_forward(out, pre, inp, w, b, N, C, H);
        else
          x.be.matmul_gelu_forward(out, inp, w, b, N, C, H);
      });
    } else {
      x.be.matmul_forward(pre, inp, w, b, N, C, H, false);
      x.be.gelu_forward(out, pre, N * H);
    }
    Outputs o;
    o.add("out", x.get(out, N * H));
    if (with_pre) o.add("pre", x.get(pre, N * H));
    return o;
  };
  for (bool with_pre : {false, true}) {
    cs.push_back({fmt::format("matmul_gelu_forward{} vs matmul+gelu N={} C={} OC={} {}",
                              with_pre ? " pre" : "", N, C, H, d.label),
                  {Op::matmul_gelu_forward},
                  [=](Ctx& x) { return mg(x, true, with_pre); },
                  [=](Ctx& x) { return mg(x, false, with_pre); }});
    cs.back().flops = 2.0 * N * C * H;
  }
  // mlp.c_proj backward with the GELU backward of its input fused in: W (4C, C)
  // saved: what the fused backward takes, gelu' (from gelu_forward_fused) or the pre-activation
  auto mbg = [=](Ctx& x, bool fused, GeluSaved saved) {
    auto pre = x.in(normal(N * H, 30, 1.5f));
    auto w = x.in(normal(H * C, 31, 0.1f)), dout = x.in(normal(N * C, 32));
    float* g = x.out(N * H);
    float* dinp = x.out(N * H);
    float* dw = x.in(normal(H * C, 33));
    float* db = x.in(normal(C, 34));
    if (fused && saved == GeluSaved::input) {
      x.be.gelu_forward(g, pre, N * H);
      x.call([&] {
        x.be.matmul_backward_gelu(dinp, dw, db, dout, g, w, pre, GeluSaved::input, N, H, C);
      });
    } else if (fused) {
      float* dgelu = x.out(N * H);  // bf16 under bf16 (half of it used)
      x.be.gelu_forward_fused(g, dgelu, pre, N * H);
      x.call([&] { x.be.matmul_backward_gelu(dinp, dw, db, dout, g, w, dgelu, N, H, C); });
    } else {
      x.be.gelu_forward(g, pre, N * H);
      x.be.matmul_backward(dinp, dw, db, dout, g, w, N, H, C, false);
      x.be.gelu_backward(dinp, pre, dinp, N * H);
    }
    Outputs o;
    o.add("dinp", x.get(dinp, N * H));
    o.add("dw", x.get(dw, (int64_t)H * C));
    o.add("dbias", x.get(db, C));
    return o;
  };
  for (GeluSaved saved : {GeluSaved::derivative, GeluSaved::input}) {
    const bool input = saved == GeluSaved::input;
    cs.push_back({fmt::format("matmul_backward_gelu{} vs matmul_backward+gelu_backward N={} C={} "
                              "OC={} {}",
                              input ? " saved=input" : "", N, H, C, d.label),
                  input ? std::vector<Op>{Op::gelu_forward, Op::matmul_backward_gelu}
                        : std::vector<Op>{Op::gelu_forward_fused, Op::matmul_backward_gelu},
                  [=](Ctx& x) { return mbg(x, true, saved); },
                  [=](Ctx& x) { return mbg(x, false, saved); }});
    cs.back().flops = 4.0 * N * C * H;
  }
}

// ---- attention ----------------------------------------------------------------------------
void add_attention(std::vector<OpCase>& cs, const Dims& d) {
  const int64_t N = d.N(), C = d.C;
  const double fwd_flops = 2.0 * d.B * (double)d.T * d.T * d.C;  // the causal half, 2 products
  const int64_t att_n = (int64_t)d.B * d.NH * d.T * d.T, lse_n = (int64_t)d.B * d.NH * d.T;
  cs.push_back({"attention_forward " + dims_str(d), {Op::attention_forward}, [=](Ctx& x) {
                  auto qkv = x.in(normal(N * 3 * C, 40));
                  float *out = x.out(N * C), *att = x.out(att_n);
                  x.call([&] { x.be.attention_forward(out, att, qkv, d.B, d.T, d.C, d.NH); });
                  Outputs o;
                  o.add("out", x.get(out, N * C));
                  o.add("att", x.get(att, att_n));
                  return o;
                }});
  cs.back().flops = fwd_flops;
  cs.push_back(
      {"attention_forward_fused " + dims_str(d), {Op::attention_forward_fused}, [=](Ctx& x) {
         auto qkv = x.in(normal(N * 3 * C, 40));
         float *out = x.out(N * C), *lse = x.out(lse_n);
         x.call([&] { x.be.attention_forward_fused(out, lse, qkv, d.B, d.T, d.C, d.NH); });
         Outputs o;
         o.add("out", x.get(out, N * C));
         o.add("lse", x.get(lse, lse_n));
         return o;
       }});
  cs.back().flops = fwd_flops;
  cs.push_back({"attention_backward " + dims_str(d),
                {Op::attention_forward, Op::attention_backward},
                [=](Ctx& x) {
                  auto qkv = x.in(normal(N * 3 * C, 40)), dout = x.in(normal(N * C, 41));
                  float *out = x.out(N * C), *att = x.out(att_n), *dqkv = x.out(N * 3 * C);
                  x.be.attention_forward(out, att, qkv, d.B, d.T, d.C, d.NH);
                  x.call(
                      [&] { x.be.attention_backward(dqkv, dout, qkv, att, d.B, d.T, d.C, d.NH); });
                  Outputs o;
                  o.add("dqkv", x.get(dqkv, N * 3 * C));
                  return o;
                }});
  cs.back().flops = 2 * fwd_flops;
  auto bwd = [=](Ctx& x, bool fused) {
    auto qkv = x.in(normal(N * 3 * C, 40)), dout = x.in(normal(N * C, 41));
    float *out = x.out(N * C), *dqkv = x.out(N * 3 * C);
    if (fused) {
      float* lse = x.out(lse_n);
      x.be.attention_forward_fused(out, lse, qkv, d.B, d.T, d.C, d.NH);
      x.call(
          [&] { x.be.attention_backward_fused(dqkv, dout, qkv, out, lse, d.B, d.T, d.C, d.NH); });
    } else {
      float* att = x.out(att_n);
      x.be.attention_forward(out, att, qkv, d.B, d.T, d.C, d.NH);
      x.be.attention_backward(dqkv, dout, qkv, att, d.B, d.T, d.C, d.NH);
    }
    Outputs o;
    o.add("dqkv", x.get(dqkv, N * 3 * C));
    return o;
  };
  cs.push_back({"attention_backward_fused vs attention_backward " + dims_str(d),
                {Op::attention_forward_fused, Op::attention_backward_fused},
                [=](Ctx& x) { return bwd(x, true); },
                [=](Ctx& x) { return bwd(x, false); }});
  cs.back().flops = 2.5 * fwd_flops;
}

// ---- GELU, loss ---------------------------------------------------------------------------
void add_gelu_and_loss(std::vector<OpCase>& cs, const Dims& d) {
  const int64_t n = d.N() * 4 * d.C + 5;  // odd tail
  cs.push_back({fmt::format("gelu_forward n={} {}", n, d.label), {Op::gelu_forward}, [=](Ctx& x) {
                  auto inp = x.in(normal(n, 50, 3.0f));
                  float* out = x.out(n);
                  x.call([&] { x.be.gelu_forward(out, inp, n); });
                  Outputs o;
                  o.add("out", x.get(out, n));
                  return o;
                }});
  cs.back().bytes = 2.0 * n * 4;
  for (bool alias : {false, true})
    cs.push_back({fmt::format("gelu_backward n={}{} {}", n, alias ? " dinp=dout" : "", d.label),
                  {Op::gelu_backward},
                  [=](Ctx& x) {
                    auto inp = x.in(normal(n, 50, 3.0f));
                    float* dout = x.in(normal(n, 51));
                    float* dinp = alias ? dout : x.out(n);
                    x.call([&] { x.be.gelu_backward(dinp, inp, dout, n); });
                    Outputs o;
                    o.add("dinp", x.get(dinp, n));
                    return o;
                  }});
  for (bool with_dgelu : {true, false}) {
    auto gf = [=](Ctx& x, bool fused) {
      auto inp = x.in(normal(n, 50, 3.0f));
      float *out = x.out(n), *dg = x.out(n);
      if (fused) {
        x.call([&] { x.be.gelu_forward_fused(out, with_dgelu ? dg : nullptr, inp, n); });
      } else {
        x.be.gelu_forward(out, inp, n);
        x.be.gelu_backward(dg, inp, x.in(std::vector<float>(n, 1.0f)), n);
      }
      Outputs o;
      o.add("out", x.get(out, n));
      if (with_dgelu) o.add("dgelu", x.get(dg, n));
      return o;
    };
    cs.push_back({fmt::format("gelu_forward_fused{} vs gelu_forward+gelu_backward n={} {}",
                              with_dgelu ? "" : " dgelu=null", n, d.label),
                  {Op::gelu_forward_fused},
                  [=](Ctx& x) { return gf(x, true); },
                  [=](Ctx& x) { return gf(x, false); }});
    cs.back().bytes = 3.0 * n * 4;
  }
  const int64_t N = d.N();
  const int Vv = d.V;
  const float dloss = 1.0f / N;
  cs.push_back({fmt::format("softmax_crossentropy_forward N={} V={} {}", N, Vv, d.label),
                {Op::softmax_crossentropy_forward},
                [=](Ctx& x) {
                  auto logits = x.in(normal(N * Vv, 52, 3.0f));
                  auto tg = x.in(ids(N, Vv, 53));
                  float *probs = x.out(N * Vv), *losses = x.out(N);
                  x.call(
                      [&] { x.be.softmax_crossentropy_forward(probs, losses, logits, tg, N, Vv); });
                  Outputs o;
                  o.add("probs", x.get(probs, N * Vv));
                  o.add("losses", x.get(losses, N));
                  return o;
                }});
  cs.back().bytes = 2.0 * N * Vv * 4;
  auto xent = [=](Ctx& x, bool fused) {
    auto logits = x.in(normal(N * Vv, 52, 3.0f));
    auto tg = x.in(ids(N, Vv, 53));
    float* losses = x.out(N);
    Outputs o;
    if (fused) {
      x.call([&] { x.be.softmax_crossentropy_fused(logits, losses, tg, dloss, N, Vv); });
      o.add("losses", x.get(losses, N));
      o.add("dlogits", x.get(logits, N * Vv));
    } else {
      float *probs = x.out(N * Vv), *dl = x.out(N * Vv);
      x.be.softmax_crossentropy_forward(probs, losses, logits, tg, N, Vv);
      x.be.softmax_crossentropy_backward(dl, probs, tg, dloss, N, Vv);
      o.add("losses", x.get(losses, N));
      o.add("dlogits", x.get(dl, N * Vv));
    }
    return o;
  };
  cs.push_back({fmt::format("softmax_crossentropy_backward N={} V={} {}", N, Vv, d.label),
                {Op::softmax_crossentropy_forward, Op::softmax_crossentropy_backward},
                [=](Ctx& x) {
                  auto logits = x.in(normal(N * Vv, 52, 3.0f));
                  auto tg = x.in(ids(N, Vv, 53));
                  float *probs = x.out(N * Vv), *losses = x.out(N), *dl = x.out(N * Vv);
                  x.be.softmax_crossentropy_forward(probs, losses, logits, tg, N, Vv);
                  x.call([&] { x.be.softmax_crossentropy_backward(dl, probs, tg, dloss, N, Vv); });
                  Outputs o;
                  o.add("dlogits", x.get(dl, N * Vv));
                  return o;
                }});
  cs.back().bytes = 2.0 * N * Vv * 4;
  cs.push_back(
      {fmt::format("softmax_crossentropy_fused vs forward+backward N={} V={} {}", N, Vv, d.label),
       {Op::softmax_crossentropy_fused},
       [=](Ctx& x) { return xent(x, true); },
       [=](Ctx& x) { return xent(x, false); }});
  cs.back().bytes = 2.0 * N * Vv * 4;
}

// ---- optimizer and gradient reductions ----------------------------------------------------
void add_optimizer(std::vector<OpCase>& cs, const Dims& d) {
  const int64_t n = d.N() * d.C + 7;
  cs.push_back(
      {fmt::format("adamw_update n={} {}", n, d.label), {Op::adamw_update}, [=](Ctx& x) {
         float *p = x.in(normal(n, 60)), *m = x.in(normal(n, 61, 0.1f));
         float* v = x.in(normal(n, 62, 0.01f, 0.05f));  // positive
         auto g = x.in(normal(n, 63));
         x.call([&] { x.be.adamw_update(p, g, m, v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 3); });
         Outputs o;
         o.add("p", x.get(p, n));
         o.add("m", x.get(m, n));
         o.add("v", x.get(v, n));
         return o;
       }});
  cs.back().bytes = 7.0 * n * 4;
  // three tensors of odd sizes, gradients multiplied by 0.5, against scale + adamw_update
  auto af = [=](Ctx& x, bool fused) {
    const int64_t sizes[3] = {n, d.C, 7};
    const float wd[3] = {0.1f, 0.0f, 0.1f};
    float *p[3], *m[3], *v[3], *g[3];
    for (int i = 0; i < 3; ++i) {
      p[i] = x.in(normal(sizes[i], 64 + i));
      m[i] = x.in(normal(sizes[i], 70 + i, 0.1f));
      v[i] = x.in(normal(sizes[i], 76 + i, 0.01f, 0.05f));
      g[i] = x.in(normal(sizes[i], 82 + i));
    }
    if (fused) {
      const float* gc[3] = {g[0], g[1], g[2]};
      x.call(
          [&] { x.be.adamw_fused(p, gc, m, v, sizes, wd, 3, 0.5f, 1e-2f, 0.9f, 0.95f, 1e-8f, 5); });
    } else {
      for (int i = 0; i < 3; ++i) {
        x.be.scale(g[i], 0.5f, sizes[i]);
        x.be.adamw_update(p[i], g[i], m[i], v[i], sizes[i], 1e-2f, 0.9f, 0.95f, 1e-8f, wd[i], 5);
      }
    }
    Outputs o;
    for (int i = 0; i < 3; ++i) {
      o.add(fmt::format("p{}", i), x.get(p[i], sizes[i]));
      o.add(fmt::format("m{}", i), x.get(m[i], sizes[i]));
      o.add(fmt::format("v{}", i), x.get(v[i], sizes[i]));
    }
    return o;
  };
  cs.push_back({fmt::format("adamw_fused vs scale+adamw_update n={} {}", n, d.label),
                {Op::adamw_fused},
                [=](Ctx& x) { return af(x, true); },
                [=](Ctx& x) { return af(x, false); }});
  cs.back().bytes = 7.0 * n * 4;
  const int64_t big = 4 * n + 1;  // spans several reduction chunks when large
  cs.push_back({fmt::format("sum_squares n={} {}", big, d.label), {Op::sum_squares}, [=](Ctx& x) {
                  auto g = x.in(normal(big, 90));
                  double s = 0;
                  x.call([&] { s = x.be.sum_squares(g, big); });
                  Outputs o;
                  o.add("sum", {static_cast<float>(s)});
                  return o;
                }});
  cs.back().bytes = 4.0 * big;
  cs.push_back({fmt::format("scale n={} {}", big, d.label), {Op::scale}, [=](Ctx& x) {
                  float* g = x.in(normal(big, 91));
                  x.call([&] { x.be.scale(g, 0.37f, big); });
                  Outputs o;
                  o.add("g", x.get(g, big));
                  return o;
                }});
  cs.back().bytes = 8.0 * big;
}

}  // namespace

std::vector<OpCase> make_op_cases() {
  std::vector<OpCase> cs;
  for (const Dims& d : all_dims()) {
    add_embedding(cs, d);
    add_layernorm(cs, d);
    add_matmul(cs, d);
    add_attention(cs, d);
    add_gelu_and_loss(cs, d);
    add_optimizer(cs, d);
  }
  // head size 128: the flash kernels' third form (the sizes above have head sizes 8, 32, 64)
  add_attention(cs, Dims{"head128", 1, 80, 256, 2, 0});
  return cs;
}

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cs = make_op_cases();
  return cs;
}

bool supports_all(const Backend& be, const std::vector<Op>& ops, Precision p) {
  for (Op op : ops)
    if (!be.supports(op, p)) return false;
  return true;
}

// Never destroyed: a backend torn down among the static destructors would outlive the
// runtimes it uses (OpenMP's, the SIMT runtime's).
Backend* shared_backend(const std::string& name, std::string* why) {
  static auto& made = *new std::map<std::string, Backend*>;
  static auto& reasons = *new std::map<std::string, std::string>;
  if (!made.count(name)) {
    try {
      made[name] = make_backend(name).release();
    } catch (const Error& e) {
      if (!device_traits(name).indexed) throw;  // a GPU, which this machine may lack
      made[name] = nullptr;
      reasons[name] = fmt::format("skipped: no {} device ({})", name, e.what());
    }
  }
  if (why) *why = reasons[name];
  return made[name];
}

}  // namespace gt::test
