// The CUDA backend's arithmetic on the host: every function of backend/cuda/kernel_math.h,
// run over the index space its kernel launches, and every product plan of
// backend/cuda/host_plan.h, run through a plain column-major product, against the reference
// backend (float64 sums). Runs on every machine, GPU or not: on a GPU, backend_ops_test then
// checks the launches and cuBLASLt the same way against the same reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/fast_math.h"
#include "backend/cuda/host_plan.h"
#include "backend/cuda/kernel_math.h"
#include "backend/cuda/kernels.h"
#include "backend/simt/simt_host.h"
#include "op_harness.h"

namespace gt::test {
namespace {

namespace m = gt::cuda_math;
namespace plan = gt::cuda_plan;
using F = std::vector<float>;

constexpr double kTol = 2e-6;  // normalized error of f32 arithmetic against float64 sums

std::unique_ptr<Backend> ref() { return make_backend("ref"); }
double err(const F& x, const F& r) { return normalized_error(x, r); }

/// f(i) for i in [0, n): what the CUDA kernel's threads do.
template <typename Fn>
void run(int64_t n, Fn f) {
  for (int64_t i = 0; i < n; ++i) f(i);
}
F widen(const std::vector<uint16_t>& h) {
  F f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = m::bf16_to_float(h[i]);
  return f;
}

TEST(CudaHostMath, Bf16RoundingIsTheCpuBackends) {
  std::mt19937 g(1);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t u = g();
    float f;
    std::memcpy(&f, &u, 4);
    ASSERT_EQ(m::to_bf16(f), cpu::to_bf16(f)) << std::hex << u;
    const uint32_t bits = g();
    ASSERT_EQ(m::to_bf16_stochastic(f, bits), cpu::to_bf16_stochastic(f, bits)) << std::hex << u;
  }
  EXPECT_EQ(m::splitmix64(12345), cpu::splitmix64(12345));
}

TEST(CudaHostMath, Fp16RoundingIsTheHardwares) {
  // every 251st float bit pattern (17 million), plus the edges, against the x86 conversion
  auto same = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    const uint16_t want = cpu::to_f16(f), got = m::to_f16(f);
    if (std::isnan(f)) return (got & 0x7C00u) == 0x7C00u && (got & 0x3FFu) != 0;
    return got == want;
  };
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 251)
    ASSERT_TRUE(same(uint32_t(u))) << std::hex << u;
  for (float f : {65504.f, 65519.f, 65520.f, 6.0e-8f, 2.98e-8f, 5.96e-8f, 6.1035e-5f, 1.0f / 3})
    for (float s : {1.f, -1.f}) ASSERT_TRUE(same(m::float_bits(f * s))) << f * s;
}

TEST(CudaHostMath, Fp8CastsAreNearestEvenAndSaturate) {
  for (bool e5m2 : {false, true}) {
    // every code decodes and encodes back to itself (NaN to NaN)
    std::vector<float> values;
    for (int c = 0; c < 256; ++c) {
      const float v = m::fp8_to_float(uint8_t(c), e5m2);
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(m::fp8_to_float(m::to_fp8(v, e5m2), e5m2)));
        continue;
      }
      if (std::isinf(v)) continue;
      if (!(v == 0 && c == 0x80)) {
        EXPECT_EQ(m::to_fp8(v, e5m2), c) << e5m2 << " code " << c;
      }
      values.push_back(v);
    }
    EXPECT_EQ(*std::max_element(values.begin(), values.end()), e5m2 ? 57344.f : 448.f);
    // random floats go to the nearest value, ties to the even code, beyond the range to the max
    std::mt19937 g(7);
    std::uniform_real_distribution<float> mag(-20, 20);
    for (int i = 0; i < 200000; ++i) {
      const float x = std::ldexp(1.0f + (g() % 1024) / 1024.0f, int(mag(g))) * (g() % 2 ? 1 : -1);
      const float got = m::fp8_to_float(m::to_fp8(x, e5m2), e5m2);
      const float lim = e5m2 ? 57344.f : 448.f;
      if (std::fabs(x) >= lim) {
        ASSERT_EQ(got, std::copysign(lim, x)) << x;
        continue;
      }
      float best = 0, bd = INFINITY;
      for (float v : values)
        if (std::fabs(v - x) < bd) bd = std::fabs(v - x), best = v;
      ASSERT_EQ(std::fabs(got - x), bd) << x << " -> " << got << ", nearest " << best;
      if (std::fabs(got - x) == bd && got != best) {  // a tie: the even code
        ASSERT_EQ(m::to_fp8(got, e5m2) & 1, 0) << x;
      }
    }
  }
}

TEST(CudaHostMath, Fp8DelayedScalingFollowsTheAmaxHistory) {
  std::vector<float> state(m::kFp8StateFloats, 0.f), partial = {2.f, 4.f};
  m::fp8_scale_step(state.data(), partial.data(), 2, 448.f);
  EXPECT_EQ(state[m::kAmaxHistory + 2], 448.f / 4) << "first use: the current amax";
  partial = {100.f, 8.f};
  m::fp8_scale_step(state.data(), partial.data(), 2, 448.f);
  EXPECT_EQ(state[m::kAmaxHistory + 2], 448.f / 4) << "delayed: the history before this step";
  EXPECT_EQ(state[m::kFp8Dequant], 4.f / 448.f);
  partial = {1.f};
  m::fp8_scale_step(state.data(), partial.data(), 1, 448.f);
  EXPECT_EQ(state[m::kAmaxHistory + 2], 448.f / 100) << "the largest amax in the history";
  for (int i = 0; i < m::kAmaxHistory; ++i)
    m::fp8_scale_step(state.data(), partial.data(), 1, 448.f);
  EXPECT_EQ(state[m::kAmaxHistory + 2], 448.f / 1) << "100 left the history";
  // the cast of a transposed copy, at scale 1
  state[m::kAmaxHistory + 2] = 1.0f;
  std::vector<float> x = {1, 2, 3, 4, 5, 6};  // (2, 3)
  std::vector<uint8_t> q(6);
  run(6, [&](int64_t i) {
    m::fp8_quantize_elem(i, q.data(), x.data(), state.data(), 2, 3, true, false);
  });
  EXPECT_EQ(m::fp8_to_float(q[1], false), 4.f);  // (3, 2): row 0 = x[0][0], x[1][0]
  EXPECT_EQ(m::fp8_to_float(q[2], false), 2.f);
}

TEST(CudaHostMath, Embedding) {
  const int B = 3, T = 5, C = 7, V = 11;
  auto wte = normal(V * C, 1), wpe = normal(T * C, 2), dout = normal(B * T * C, 3);
  auto inp = ids(B * T, V, 4);
  inp[3] = inp[9] = inp[14] = 2;  // repeats
  auto be = ref();
  F want(B * T * C), got(B * T * C);
  be->embedding_forward(want.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
  run(B * T * C, [&](int64_t i) {
    m::embedding_forward_elem(i, got.data(), inp.data(), wte.data(), wpe.data(), T, C);
  });
  EXPECT_EQ(err(got, want), 0.0);
  F dwte_r = normal(V * C, 5), dwpe_r = normal(T * C, 6), dwte = dwte_r, dwpe = dwpe_r;
  be->embedding_backward(dwte_r.data(), dwpe_r.data(), dout.data(), inp.data(), B, T, C);
  std::vector<int32_t> idx;
  const int U = plan::token_index(inp, idx);
  run(int64_t(U) * C, [&](int64_t i) {
    m::embedding_backward_wte_elem(i, dwte.data(), dout.data(), idx.data(), idx.data() + U,
                                   idx.data() + 2 * U + 1, C);
  });
  run(T * C,
      [&](int64_t i) { m::embedding_backward_wpe_elem(i, dwpe.data(), dout.data(), B, T, C); });
  EXPECT_EQ(err(dwte, dwte_r), 0.0) << "same order of additions as the reference";
  EXPECT_EQ(err(dwpe, dwpe_r), 0.0);
}

TEST(CudaHostMath, LayerNormForwardBackward) {
  const int64_t N = 300;  // two partial-sum chunks of 256 rows
  const int C = 24;
  const int64_t R = 256, K = (N + R - 1) / R;
  auto x = normal(N * C, 10, 2.0f, 0.5f), w = normal(C, 11), b = normal(C, 12);
  auto dout = normal(N * C, 13), a2 = normal(N * C, 14);
  auto be = ref();
  F out_r(N * C), mean_r(N), rstd_r(N), out(N * C), mean(N), rstd(N);
  be->layernorm_forward(out_r.data(), mean_r.data(), rstd_r.data(), x.data(), w.data(), b.data(), N,
                        C);
  run(N, [&](int64_t i) {
    m::layernorm_forward_row(i, out.data(), nullptr, mean.data(), rstd.data(), x.data(), w.data(),
                             b.data(), C);
  });
  EXPECT_LT(err(out, out_r), kTol);
  EXPECT_LT(err(rstd, rstd_r), kTol);
  std::vector<uint16_t> o16(N * C);  // the bf16 output is the f32 one rounded
  run(N, [&](int64_t i) {
    m::layernorm_forward_row(i, nullptr, o16.data(), mean.data(), rstd.data(), x.data(), w.data(),
                             b.data(), C);
  });
  EXPECT_LT(err(widen(o16), out_r), 1e-2);

  F dinp_r = normal(N * C, 15), dw_r = normal(C, 16), db_r = normal(C, 17);
  F dinp = dinp_r, dw = dw_r, db = db_r, partial(K * 2 * C);
  be->layernorm_backward(dinp_r.data(), dw_r.data(), db_r.data(), dout.data(), x.data(), w.data(),
                         mean_r.data(), rstd_r.data(), N, C);
  run(N, [&](int64_t i) {
    m::layernorm_backward_row(i, dinp.data(), dout.data(), x.data(), w.data(), mean_r.data(),
                              rstd_r.data(), C);
  });
  run(K * C, [&](int64_t j) {
    m::layernorm_params_partial(j, partial.data(), dout.data(), x.data(), mean_r.data(),
                                rstd_r.data(), N, C, R);
  });
  run(C, [&](int64_t c) { m::column_finish(c, dw.data(), partial.data(), K, 2 * C); });
  run(C, [&](int64_t c) { m::column_finish(c, db.data(), partial.data() + C, K, 2 * C); });
  EXPECT_LT(err(dinp, dinp_r), kTol);
  EXPECT_LT(err(dw, dw_r), kTol);
  EXPECT_LT(err(db, db_r), kTol);

  F res_r(N * C), res(N * C);  // fused residual + LayerNorm
  be->residual_layernorm_forward(res_r.data(), out_r.data(), mean_r.data(), rstd_r.data(), x.data(),
                                 a2.data(), w.data(), b.data(), N, C);
  run(N, [&](int64_t i) {
    m::residual_layernorm_row(i, res.data(), out.data(), nullptr, mean.data(), rstd.data(),
                              x.data(), a2.data(), w.data(), b.data(), C);
  });
  EXPECT_EQ(err(res, res_r), 0.0);
  EXPECT_LT(err(out, out_r), kTol);
}

/// D = op(A) op(B) + beta D, column-major, as cuBLASLt computes it (in double here).
void colmajor_product(const plan::Gemm& g, const float* A, const float* B, float* D) {
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < g.k; ++p)
        s += double(plan::at(A, g.ta, i, p, g.lda)) * plan::at(B, g.tb, p, j, g.ldb);
      float& d = D[i + j * g.ldd];
      d = static_cast<float>(s + g.beta * d);
    }
}
const float* role(plan::Role r, const F& w, const F& x, const F& d) {
  return r == plan::Role::weight ? w.data() : r == plan::Role::input ? x.data() : d.data();
}

TEST(CudaHostMath, ProductPlansAreTheReferenceProducts) {
  const int64_t N = 6;
  const int C = 5, OC = 7;
  for (bool wt : {false, true}) {
    auto x = normal(N * C, 20), w = normal(C * OC, 21), bias = normal(OC, 22);
    auto dout = normal(N * OC, 23);
    auto be = ref();
    F out_r(N * OC), out(N * OC);
    be->matmul_forward(out_r.data(), x.data(), w.data(), bias.data(), N, C, OC, wt);
    const auto f = plan::forward(N, C, OC, wt);
    colmajor_product(f, role(f.a, w, x, dout), role(f.b, w, x, dout), out.data());
    for (int64_t i = 0; i < N * OC; ++i) out[i] += bias[i % OC];  // BIAS epilogue: per row m
    EXPECT_EQ(f.m, OC);
    EXPECT_LT(err(out, out_r), kTol) << "forward, w_transposed " << wt;

    F dinp_r(N * C), dw_r = normal(C * OC, 24), db_r = normal(OC, 25);
    F dinp(N * C), dw = dw_r, db = db_r;
    be->matmul_backward(dinp_r.data(), dw_r.data(), db_r.data(), dout.data(), x.data(), w.data(), N,
                        C, OC, wt);
    const auto gi = plan::backward_input(N, C, OC, wt);
    colmajor_product(gi, role(gi.a, w, x, dout), role(gi.b, w, x, dout), dinp.data());
    const auto gw = plan::backward_weight(N, C, OC, wt);
    EXPECT_EQ(gw.beta, 1.0f) << "weight gradients accumulate";
    colmajor_product(gw, role(gw.a, w, x, dout), role(gw.b, w, x, dout), dw.data());
    const int64_t K = (N + 3) / 4;
    F partial(K * OC);
    run(K * OC,
        [&](int64_t j) { m::column_partial(j, partial.data(), dout.data(), nullptr, N, OC, 4); });
    run(OC, [&](int64_t c) { m::column_finish(c, db.data(), partial.data(), K, OC); });
    EXPECT_LT(err(dinp, dinp_r), kTol) << "dinp, w_transposed " << wt;
    EXPECT_LT(err(dw, dw_r), kTol) << "dw, w_transposed " << wt;
    EXPECT_LT(err(db, db_r), kTol) << "dbias";
    // the bias gradient epilogue of the dW plan (16-bit precisions): BGRADA sums op(A)'s rows
    // over k, BGRADB op(B)'s columns; either is dout's column sums (plus dbias's old value)
    const bool on_a = plan::bias_gradient_epilogue(gw) == plan::LtEpi::bgrada;
    EXPECT_EQ(on_a ? gw.m : gw.n, OC);
    F bg = normal(OC, 25);  // db_r's old value
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t p = 0; p < gw.k; ++p)
        bg[o] += on_a ? plan::at(role(gw.a, w, x, dout), gw.ta, o, p, gw.lda)
                      : plan::at(role(gw.b, w, x, dout), gw.tb, p, o, gw.ldb);
    EXPECT_LT(err(bg, db_r), kTol) << "the bias gradient epilogue, w_transposed " << wt;
  }
}

TEST(CudaHostMath, AttentionBothFormsForwardBackward) {
  const int B = 2, T = 9, C = 12, NH = 3;
  const m::AttnShape s{B, T, C, NH};
  const int64_t rows = int64_t(B) * NH * T;
  auto qkv = normal(B * T * 3 * C, 30), dout = normal(B * T * C, 31);
  auto be = ref();
  F out_r(B * T * C), att_r(rows * T), lse_r(rows), dqkv_r(B * T * 3 * C);
  be->attention_forward(out_r.data(), att_r.data(), qkv.data(), B, T, C, NH);
  be->attention_forward_fused(out_r.data(), lse_r.data(), qkv.data(), B, T, C, NH);
  be->attention_backward(dqkv_r.data(), dout.data(), qkv.data(), att_r.data(), B, T, C, NH);

  F out(B * T * C, NAN), att(rows * T, NAN), lse(rows, NAN), delta(rows), dqkv(B * T * 3 * C, NAN);
  run(rows, [&](int64_t r) {
    m::attention_forward_row(r, out.data(), nullptr, lse.data(), att.data(), qkv.data(), s);
  });
  EXPECT_LT(err(out, out_r), kTol);
  EXPECT_LT(err(att, att_r), kTol);
  EXPECT_LT(err(lse, lse_r), kTol);
  // unfused backward: probabilities from att, row sums from them
  run(rows, [&](int64_t r) {
    m::attention_delta_row(r, delta.data(), dout.data(), qkv.data(), att.data(), nullptr, nullptr,
                           nullptr, s);
  });
  run(rows, [&](int64_t r) {
    m::attention_dq_row(r, dqkv.data(), nullptr, dout.data(), qkv.data(), att.data(), nullptr,
                        delta.data(), s);
  });
  run(rows, [&](int64_t r) {
    m::attention_dkv_row(r, dqkv.data(), nullptr, dout.data(), qkv.data(), att.data(), nullptr,
                         delta.data(), s);
  });
  EXPECT_LT(err(dqkv, dqkv_r), 1e-5) << "unfused";
  // fused backward: probabilities from lse, row sums dout.out
  F dqkv2(B * T * 3 * C, NAN);
  run(rows, [&](int64_t r) {
    m::attention_delta_row(r, delta.data(), dout.data(), qkv.data(), nullptr, lse.data(),
                           out.data(), nullptr, s);
  });
  run(rows, [&](int64_t r) {
    m::attention_dq_row(r, dqkv2.data(), nullptr, dout.data(), qkv.data(), nullptr, lse.data(),
                        delta.data(), s);
  });
  run(rows, [&](int64_t r) {
    m::attention_dkv_row(r, dqkv2.data(), nullptr, dout.data(), qkv.data(), nullptr, lse.data(),
                         delta.data(), s);
  });
  EXPECT_LT(err(dqkv2, dqkv_r), 1e-5) << "fused";
}

TEST(CudaHostMath, AttentionWithACompileTimeHeadSizeIsTheSame) {
  const int B = 1, T = 6, C = 8, NH = 2;  // head size 4
  const m::AttnShape s{B, T, C, NH};
  const int64_t rows = int64_t(B) * NH * T;
  auto qkv = normal(B * T * 3 * C, 33), dout = normal(B * T * C, 34);
  F out0(B * T * C), out4(B * T * C), lse0(rows), lse4(rows), delta(rows);
  F d0(B * T * 3 * C), d4(B * T * 3 * C);
  run(rows, [&](int64_t r) {
    m::attention_forward_row<0>(r, out0.data(), nullptr, lse0.data(), nullptr, qkv.data(), s);
    m::attention_forward_row<4>(r, out4.data(), nullptr, lse4.data(), nullptr, qkv.data(), s);
  });
  // equal up to the compiler's fused multiply-adds, which differ between the two loops
  EXPECT_LT(err(out4, out0), kTol);
  EXPECT_LT(err(lse4, lse0), kTol);
  run(rows, [&](int64_t r) {
    m::attention_delta_row<4>(r, delta.data(), dout.data(), qkv.data(), nullptr, lse4.data(),
                              out4.data(), nullptr, s);
  });
  run(rows, [&](int64_t r) {
    m::attention_dq_row<0>(r, d0.data(), nullptr, dout.data(), qkv.data(), nullptr, lse0.data(),
                           delta.data(), s);
    m::attention_dkv_row<0>(r, d0.data(), nullptr, dout.data(), qkv.data(), nullptr, lse0.data(),
                            delta.data(), s);
    m::attention_dq_row<4>(r, d4.data(), nullptr, dout.data(), qkv.data(), nullptr, lse4.data(),
                           delta.data(), s);
    m::attention_dkv_row<4>(r, d4.data(), nullptr, dout.data(), qkv.data(), nullptr, lse4.data(),
                            delta.data(), s);
  });
  EXPECT_LT(err(d4, d0), kTol);
}

TEST(CudaHostMath, AttentionNanQuerySpoilsItsRowOnly) {
  const int B = 1, T = 4, C = 4, NH = 1;
  auto qkv = normal(B * T * 3 * C, 32);
  qkv[2 * 3 * C + 1] = NAN;  // q of t = 2
  F out(B * T * C);
  run(B * NH * T, [&](int64_t r) {
    m::attention_forward_row(r, out.data(), nullptr, nullptr, nullptr, qkv.data(),
                             m::AttnShape{B, T, C, NH});
  });
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < C; ++i) EXPECT_EQ(std::isnan(out[t * C + i]), t == 2) << t << "," << i;
}

TEST(CudaHostMath, GeluSoftmaxResidual) {
  const int64_t N = 5;
  const int V = 13;
  auto x = normal(N * V, 40, 3.0f), d = normal(N * V, 41), y = normal(N * V, 42);
  auto be = ref();
  F a_r(N * V), a(N * V), g_r(N * V), g(N * V);
  be->gelu_forward(a_r.data(), x.data(), N * V);
  run(N * V, [&](int64_t i) { m::gelu_forward_elem(i, a.data(), nullptr, x.data()); });
  EXPECT_LT(err(a, a_r), kTol);
  be->gelu_backward(g_r.data(), x.data(), d.data(), N * V);
  run(N * V, [&](int64_t i) { m::gelu_backward_elem(i, g.data(), nullptr, x.data(), d.data()); });
  EXPECT_LT(err(g, g_r), kTol);
  F dg_r(N * V), dg(N * V);
  be->gelu_forward_fused(a_r.data(), dg_r.data(), x.data(), N * V);
  run(N * V, [&](int64_t i) {
    m::gelu_forward_fused_elem(i, a.data(), nullptr, dg.data(), nullptr, x.data());
  });
  EXPECT_LT(err(dg, dg_r), kTol);
  F prod = normal(N * V, 43), bias = normal(V, 44), bg(N * V), bg_r(N * V);
  for (int64_t i = 0; i < N * V; ++i) bg_r[i] = static_cast<float>(m::gelu(prod[i] + bias[i % V]));
  run(N * V, [&](int64_t i) {
    m::bias_gelu_elem(i, bg.data(), nullptr, nullptr, nullptr, prod.data(), bias.data(), V);
  });
  EXPECT_EQ(err(bg, bg_r), 0.0);
  F mul(N * V);
  run(N * V,
      [&](int64_t i) { m::mul_elem(i, mul.data(), nullptr, prod.data(), dg.data(), nullptr); });
  for (int64_t i = 0; i < N * V; ++i) ASSERT_EQ(mul[i], prod[i] * dg[i]);

  auto tg = ids(N, V, 45);
  F probs_r(N * V), loss_r(N), probs(N * V), loss(N), dl_r(N * V), dl(N * V);
  be->softmax_crossentropy_forward(probs_r.data(), loss_r.data(), x.data(), tg.data(), N, V);
  run(N, [&](int64_t i) {
    m::softmax_ce_forward_row(i, probs.data(), loss.data(), x.data(), tg.data(), V);
  });
  EXPECT_LT(err(probs, probs_r), kTol);
  EXPECT_LT(err(loss, loss_r), kTol);
  be->softmax_crossentropy_backward(dl_r.data(), probs_r.data(), tg.data(), 0.25f, N, V);
  run(N * V, [&](int64_t i) {
    m::softmax_ce_backward_elem(i, dl.data(), probs_r.data(), tg.data(), 0.25f, V);
  });
  EXPECT_EQ(err(dl, dl_r), 0.0);
  F fused = x, fused_r = x;
  be->softmax_crossentropy_fused(fused_r.data(), loss_r.data(), tg.data(), 0.25f, N, V);
  run(N, [&](int64_t i) {
    m::softmax_ce_fused_row(i, fused.data(), loss.data(), tg.data(), 0.25f, V);
  });
  EXPECT_LT(err(fused, fused_r), kTol);
  EXPECT_LT(err(loss, loss_r), kTol);

  F r(N * V), r_r(N * V);
  be->residual_forward(r_r.data(), x.data(), y.data(), N * V);
  run(N * V, [&](int64_t i) { m::residual_elem(i, r.data(), x.data(), y.data()); });
  EXPECT_EQ(err(r, r_r), 0.0);
}

TEST(CudaHostMath, AdamWAndGradientNorm) {
  const int64_t n = 1000;
  auto p_r = normal(n, 50), g = normal(n, 51), m_r = normal(n, 52, 0.1f), v_r = normal(n, 53, 0.1f);
  for (auto& v : v_r) v = std::fabs(v);
  F p = p_r, mm = m_r, v = v_r;
  auto be = ref();
  const float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gm = 0.5f;
  const int64_t t = 7;
  const float* gp = g.data();
  float *pp = p_r.data(), *mp = m_r.data(), *vp = v_r.data();
  be->adamw_fused(&pp, &gp, &mp, &vp, &n, &wd, 1, gm, lr, b1, b2, eps, t);
  const float bc1 = static_cast<float>(1.0 - std::pow(double(b1), double(t)));
  const float bc2 = static_cast<float>(std::sqrt(1.0 - std::pow(double(b2), double(t))));
  run(n, [&](int64_t j) {
    m::adamw_elem(j, p.data(), g.data(), mm.data(), v.data(), gm, lr, b1, b2, eps, 1 - lr * wd, bc1,
                  bc2);
  });
  EXPECT_LT(err(p, p_r), 1e-6);
  EXPECT_LT(err(mm, m_r), 1e-6);
  EXPECT_LT(err(v, v_r), 1e-6);

  const int64_t K = 64;
  std::vector<double> partial(K);
  run(K, [&](int64_t k) { m::sum_squares_partial(k, partial.data(), g.data(), n, K); });
  double s = 0;
  for (double x : partial) s += x;
  EXPECT_NEAR(s, be->sum_squares(g.data(), n), 1e-12 * s);
}

TEST(CudaHostMath, TokenIndexGroupsPositionsInOrder) {
  std::vector<int32_t> idx;
  const int U = plan::token_index({4, 1, 4, 0, 1, 4}, idx);
  ASSERT_EQ(U, 3);
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 1, 4, /*off*/ 0, 1, 3, 6, /*pos*/ 3, 1, 4, 0, 2, 5}));
}

}  // namespace
}  // namespace gt::test

namespace gt::test {
namespace {
// The fp8 cast kernels (kernels_elementwise.cu) on the SIMT runtime, one layout or both, over
// shapes whose sides are and are not multiples of the transposed cast's 64-wide tiles and of its
// 4-wide packs: each element is the element function's at the scale the cast recorded (a first use:
// 448 over the amax), transposed or not, and the amax joins the history.
TEST(CudaHostMath, Fp8CastKernelsCoverEveryShape) {
  using K = gt::cuda_kernels::HostKernels;
  simt::set_device(0);
  simt::Stream* s = simt::create_stream();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                            {3, 5},
                            {64, 64},
                            {67, 130},
                            {128, 36},
                            {130, 67},
                            {8, 200}}) {
    for (bool transpose : {false, true}) {
      const int64_t n = rows * cols;
      F x = normal(n, uint64_t(rows * 1000 + cols));
      x[n / 2] = 300.0f;  // the amax
      auto* dx = static_cast<float*>(simt::device_malloc(n * sizeof(float)));
      auto* dq = static_cast<uint8_t*>(simt::device_malloc(n));
      auto* dst = static_cast<float*>(simt::device_malloc(m::kFp8StateFloats * sizeof(float)));
      simt::memcpy_h2d(s, dx, x.data(), n * sizeof(float));
      simt::memset_async(s, dst, 0, m::kFp8StateFloats * sizeof(float));
      K::fp8_quantize(s, dq, dx, rows, cols, transpose, false, dst, true);
      std::vector<uint8_t> q(n), want(n);
      F st(m::kFp8StateFloats);
      simt::memcpy_d2h(s, q.data(), dq, n);
      simt::memcpy_d2h(s, st.data(), dst, st.size() * sizeof(float));
      EXPECT_EQ(st[m::kAmaxHistory], 1.0f) << "one use";
      EXPECT_EQ(st[0], 300.0f) << "amax in the history";
      run(n, [&](int64_t i) {
        m::fp8_quantize_elem(i, want.data(), x.data(), st.data(), rows, cols, transpose, false);
      });
      EXPECT_EQ(q, want) << rows << " x " << cols << (transpose ? " transposed" : "");
      if (transpose) {  // both layouts from one read, after the same first use
        auto* dq2 = static_cast<uint8_t*>(simt::device_malloc(n));
        simt::memset_async(s, dst, 0, m::kFp8StateFloats * sizeof(float));
        K::fp8_quantize_both(s, dq2, dq, dx, rows, cols, false, dst, true);
        std::vector<uint8_t> plain(n), want_plain(n);
        simt::memcpy_d2h(s, q.data(), dq, n);
        simt::memcpy_d2h(s, plain.data(), dq2, n);
        run(n, [&](int64_t i) {
          m::fp8_quantize_elem(i, want_plain.data(), x.data(), st.data(), rows, cols, false, false);
        });
        EXPECT_EQ(q, want) << rows << " x " << cols << " both: transposed";
        EXPECT_EQ(plain, want_plain) << rows << " x " << cols << " both: plain";
        simt::device_free(dq2);
      }
      simt::device_free(dst);
      simt::device_free(dq);
      simt::device_free(dx);
    }
  }
  simt::destroy_stream(s);
}
}  // namespace
}  // namespace gt::test
