// cpu::Attention's fused form with bf16 operands against a float64 reference computed from the
// same bf16-rounded q, k, v and dO: forward (out, lse, the bf16 copy) and backward (dq, dk,
// dv), at the training shape (T 64, head size 32), a T that is not a multiple of 16, T past
// one and two chunks of 64 queries, and head sizes 16 to 128 (1 to 8 vectors of 16). Three
// paths: the own kernels (backend/cpu/attention_bf16.h; skipped where the build has no
// AVX512_BF16), oneDNN's products (bf16, or emulated in f32 where this CPU has no bf16
// product), and the emulated form forced on any CPU (set_lowp_emulation).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/amx_matmul.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/attention_bf16.h"
#include "backend/cpu/onednn_matmul.h"

namespace {

/// x rounded to bf16 (nearest even), as a float.
float bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

struct Shape {
  int B, T, C, NH;
};

/// The reference of one shape: out (B,T,C), lse (B,NH,T), dqkv (B,T,3C), in float64.
struct Reference {
  std::vector<double> out, lse, dqkv;
  Reference(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout) {
    const int B = s.B, T = s.T, C = s.C, NH = s.NH, hs = C / NH;
    out.assign((size_t)B * T * C, 0.0);
    lse.assign((size_t)B * NH * T, 0.0);
    dqkv.assign((size_t)B * T * 3 * C, 0.0);
    const double scale = 1.0 / std::sqrt((double)hs);
    std::vector<double> P((size_t)T * T), dS((size_t)T * T);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h) {
        auto q = [&](int t, int c) {
          return (double)bf16(qkv[((size_t)b * T + t) * 3 * C + h * hs + c]);
        };
        auto k = [&](int t, int c) {
          return (double)bf16(qkv[((size_t)b * T + t) * 3 * C + C + h * hs + c]);
        };
        auto v = [&](int t, int c) {
          return (double)bf16(qkv[((size_t)b * T + t) * 3 * C + 2 * C + h * hs + c]);
        };
        auto dO = [&](int t, int c) {
          return (double)bf16(dout[((size_t)b * T + t) * C + h * hs + c]);
        };
        auto dq = [&](int t, int c) -> double& {
          return dqkv[((size_t)b * T + t) * 3 * C + h * hs + c];
        };
        for (int t = 0; t < T; ++t) {
          double mx = -INFINITY;
          for (int u = 0; u <= t; ++u) {
            double a = 0;
            for (int c = 0; c < hs; ++c) a += q(t, c) * k(u, c);
            P[(size_t)t * T + u] = a * scale;
            mx = std::max(mx, a * scale);
          }
          double sum = 0;
          for (int u = 0; u <= t; ++u) sum += std::exp(P[(size_t)t * T + u] - mx);
          lse[((size_t)b * NH + h) * T + t] = mx + std::log(sum);
          for (int u = 0; u <= t; ++u)
            P[(size_t)t * T + u] = std::exp(P[(size_t)t * T + u] - mx) / sum;
          for (int c = 0; c < hs; ++c) {
            double o = 0;
            for (int u = 0; u <= t; ++u) o += P[(size_t)t * T + u] * v(u, c);
            out[((size_t)b * T + t) * C + h * hs + c] = o;
          }
          // dP = dO v^T, dS = P (dP - rowsum(P dP)) scale
          double dot = 0;
          for (int u = 0; u <= t; ++u) {
            double g = 0;
            for (int c = 0; c < hs; ++c) g += dO(t, c) * v(u, c);
            dS[(size_t)t * T + u] = g;
            dot += P[(size_t)t * T + u] * g;
          }
          for (int u = 0; u <= t; ++u)
            dS[(size_t)t * T + u] = P[(size_t)t * T + u] * (dS[(size_t)t * T + u] - dot) * scale;
        }
        for (int t = 0; t < T; ++t)
          for (int u = 0; u <= t; ++u)
            for (int c = 0; c < hs; ++c) {
              dq(t, c) += dS[(size_t)t * T + u] * k(u, c);          // dQ = dS k
              dq(u, c + C) += dS[(size_t)t * T + u] * q(t, c);      // dK = dS^T q
              dq(u, c + 2 * C) += P[(size_t)t * T + u] * dO(t, c);  // dV = P^T dO
            }
      }
  }
};

/// max |got - want| over max |want|: the error relative to the tensor's scale.
template <class G>
double rel_error(const std::vector<double>& want, G got) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got(i) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / std::max(scale, 1e-3);  // all zero (dq, dk of a single row): the error itself
}

class AttentionBf16 : public ::testing::TestWithParam<Shape> {};

/// Forward and backward of att (bf16 operands, some path) at shape s against the reference.
void check_against_reference(gt::cpu::Attention& att, const Shape& s) {
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> qkv((size_t)s.B * s.T * 3 * s.C), dout((size_t)s.B * s.T * s.C);
  for (auto& x : qkv) x = nd(g);
  for (auto& x : dout) x = nd(g);
  const Reference ref(s, qkv, dout);

  std::vector<float> out(ref.out.size()), lse(ref.lse.size()), dqkv(ref.dqkv.size(), NAN);
  std::fill(out.begin(), out.end(), NAN);
  att.forward(out.data(), nullptr, lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  // bf16 operands (P, dS too) with fp32 sums: about a bf16 ulp (2^-8) of the tensor's scale
  // (seen: at most 2.7e-3 over these shapes)
  EXPECT_LT(rel_error(ref.out, [&](size_t i) { return (double)out[i]; }), 8e-3);
  double lse_err = 0;
  for (size_t i = 0; i < lse.size(); ++i)
    lse_err = std::max(lse_err, std::abs(lse[i] - ref.lse[i]));
  EXPECT_LT(lse_err, 5e-6);  // fp32 sums of exact bf16 products (seen: 4e-7)

  // the bf16 copy alone: out rounded
  std::vector<uint16_t> out16(out.size());
  att.forward(nullptr, nullptr, lse.data(), qkv.data(), s.B, s.T, s.C, s.NH, out16.data());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(from_bf16(out16[i]), bf16(out[i])) << i;

  att.backward(dqkv.data(), dout.data(), qkv.data(), nullptr, lse.data(), s.B, s.T, s.C, s.NH);
  const int C = s.C;
  for (int part = 0; part < 3; ++part) {  // dq, dk, dv each against its own scale
    std::vector<double> want;
    std::vector<float> got;
    for (size_t r = 0; r < (size_t)s.B * s.T; ++r)
      for (int c = 0; c < C; ++c) {
        want.push_back(ref.dqkv[r * 3 * C + part * C + c]);
        got.push_back(dqkv[r * 3 * C + part * C + c]);
      }
    EXPECT_LT(rel_error(want, [&](size_t i) { return (double)got[i]; }), 8e-3) << "d"
                                                                               << "qkv"[part];
  }
  std::vector<uint16_t> dqkv16(dqkv.size());
  att.backward(nullptr, dout.data(), qkv.data(), nullptr, lse.data(), s.B, s.T, s.C, s.NH,
               dqkv16.data());
  for (size_t i = 0; i < dqkv.size(); ++i) ASSERT_EQ(from_bf16(dqkv16[i]), bf16(dqkv[i])) << i;
}

TEST_P(AttentionBf16, OwnKernelsMatchAFloat64Reference) {
  const Shape s = GetParam();
  gt::cpu::Attention att;
  att.set_type(gt::cpu::AttnType::bf16);
  att.set_bf16_kernels(gt::cpu::AttnKernels::own);
  if (!att.uses_own_bf16_kernels(s.T, s.C, s.NH)) GTEST_SKIP() << "built without AVX512_BF16";
  check_against_reference(att, s);
}

/// GT_CPU_OWN_AMX=0 for a scope (on again however the scope ends).
struct OwnAmxOff {
  OwnAmxOff() { gt::cpu::set_own_amx_matmul(false); }
  ~OwnAmxOff() { gt::cpu::set_own_amx_matmul(true); }
};

// The own kernels' products on the vector unit alone (VDPBF16PS), as on a CPU without AMX,
// where the test above ran some of them on AMX tiles.
TEST_P(AttentionBf16, OwnKernelsWithoutAmxMatchAFloat64Reference) {
  if (!gt::cpu::own_amx_enabled()) GTEST_SKIP() << "no AMX here: the test above ran without it";
  const Shape s = GetParam();
  gt::cpu::Attention att;
  att.set_type(gt::cpu::AttnType::bf16);
  att.set_bf16_kernels(gt::cpu::AttnKernels::own);
  const OwnAmxOff off;
  check_against_reference(att, s);
}

TEST_P(AttentionBf16, OneDnnProductsMatchAFloat64Reference) {
  const Shape s = GetParam();
  gt::cpu::Attention att;
  att.set_type(gt::cpu::AttnType::bf16);
  att.set_bf16_kernels(gt::cpu::AttnKernels::onednn);
  ASSERT_FALSE(att.uses_own_bf16_kernels(s.T, s.C, s.NH));
  check_against_reference(att, s);
}

TEST_P(AttentionBf16, EmulatedProductsMatchAFloat64Reference) {
  const Shape s = GetParam();
  const bool was = gt::cpu::lowp_emulation_forced();  // restored after
  gt::cpu::set_lowp_emulation(true);
  gt::cpu::Attention att;
  att.set_type(gt::cpu::AttnType::bf16);
  gt::cpu::set_lowp_emulation(was);
  ASSERT_EQ(att.type(), gt::cpu::AttnType::f32_bf16);
  ASSERT_FALSE(att.uses_own_bf16_kernels(s.T, s.C, s.NH));
  check_against_reference(att, s);
}

TEST(AttentionKernels, FastestRunsOwnKernelsOnSmallHeadsAndOneDnnOnLargeOnesWithAmx) {
  using gt::cpu::own_bf16_kernels_faster;
  EXPECT_TRUE(own_bf16_kernels_faster(64, 32));  // shakespeare-char-cpu: own everywhere
  EXPECT_TRUE(own_bf16_kernels_faster(64, 64));
  const bool amx = gt::cpu::onednn_uses_amx(), tiles = gt::cpu::own_amx_enabled();
  // the own kernels on AMX tiles: theirs up to T x hs 65536 (GPT-2's T 1024, hs 64)
  EXPECT_EQ(own_bf16_kernels_faster(256, 64), !amx || tiles);  // 6 x 384, T 256
  EXPECT_EQ(own_bf16_kernels_faster(1024, 64), !amx || tiles);
  EXPECT_EQ(own_bf16_kernels_faster(2048, 64), !amx);
  gt::cpu::Attention att;
  att.set_type(gt::cpu::AttnType::bf16);
  att.set_bf16_kernels(gt::cpu::AttnKernels::own);
  if (!att.uses_own_bf16_kernels(256, 384, 6)) GTEST_SKIP() << "built without AVX512_BF16";
  att.set_bf16_kernels(gt::cpu::AttnKernels::fastest);
  EXPECT_EQ(att.uses_own_bf16_kernels(256, 384, 6), !amx || tiles);
  EXPECT_TRUE(att.uses_own_bf16_kernels(64, 128, 4));
  att.set_bf16_kernels(gt::cpu::AttnKernels::onednn);
  EXPECT_FALSE(att.uses_own_bf16_kernels(64, 128, 4));
  // the workspace the plan counts is that of the form fastest picks
  EXPECT_EQ(gt::cpu::attention_workspace_bytes(256, 384, 6, gt::cpu::AttnType::bf16, true, 2) ==
                gt::cpu::attn_bf16_head_bytes(256, 64) * 2,
            !amx || tiles);
  // with AMX, T 1025 (hs 64) runs oneDNN's products but a sampling call of 1024 rows the own
  // kernels, whose buffer is the larger there: the plan holds it
  if (amx && tiles) {
    EXPECT_GE(gt::cpu::attention_workspace_bytes(1025, 768, 12, gt::cpu::AttnType::bf16, true, 2),
              gt::cpu::attn_bf16_head_bytes(1024, 64) * 2);
  }
  // the products on the vector unit alone (GT_CPU_OWN_AMX=0): oneDNN on AMX from T x hs 4096
  const OwnAmxOff off;
  EXPECT_TRUE(own_bf16_kernels_faster(64, 64));
  EXPECT_EQ(own_bf16_kernels_faster(256, 64), !amx);
  EXPECT_EQ(own_bf16_kernels_faster(128, 64), !amx);
  EXPECT_EQ(own_bf16_kernels_faster(64, 128), !amx);
  att.set_bf16_kernels(gt::cpu::AttnKernels::fastest);
  EXPECT_EQ(att.uses_own_bf16_kernels(256, 384, 6), !amx);
  // T 65 (hs 64) runs oneDNN's products, a sampling call of 64 rows the own kernels
  if (amx) {
    EXPECT_GE(gt::cpu::attention_workspace_bytes(65, 384, 6, gt::cpu::AttnType::bf16, true, 2),
              gt::cpu::attn_bf16_head_bytes(64, 64) * 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionBf16,
                         ::testing::Values(Shape{2, 64, 128, 4},   // training: head size 32
                                           Shape{2, 37, 128, 4},   // T not a multiple of 16
                                           Shape{1, 150, 128, 4},  // three chunks of 64 queries
                                           Shape{2, 64, 128, 2},   // head size 64
                                           Shape{1, 20, 256, 2},   // head size 128
                                           Shape{1, 40, 96, 2},    // head size 48: 3 vectors
                                           Shape{1, 70, 160, 2},   // head size 80: 4 + 1
                                           Shape{1, 1, 64, 4}),    // one row, head size 16
                         [](const auto& i) {
                           const Shape& s = i.param;
                           return "T" + std::to_string(s.T) + "_hs" + std::to_string(s.C / s.NH);
                         });

}  // namespace
