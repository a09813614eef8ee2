// The CPU backend's vector exponentials (simd512.h: exp512, exp2_512) and the GELU built on
// exp2_512 (gelu.h) against float64, over their whole ranges and at the edges (NaN, infinities,
// inputs whose squares overflow).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/cpu/gelu.h"

namespace {

using namespace gt::cpu;

#if GT_SIMD512
float lane0(__m512 v) { return _mm512_cvtss_f32(v); }

TEST(FastMath, Exp2WithinItsErrorOverTheFloatRange) {
  double worst = 0;
  for (double t = -126.0; t <= 126.0; t += 0.000977) {  // 258,000 points, |f| up to 1/2
    const float tf = static_cast<float>(t);
    const double want = std::exp2(static_cast<double>(tf));
    worst = std::max(worst, std::fabs(lane0(exp2_512(_mm512_set1_ps(tf))) - want) / want);
  }
  EXPECT_LT(worst, 1e-7);  // 8e-8 measured
  EXPECT_EQ(lane0(exp2_512(_mm512_set1_ps(0.0f))), 1.0f);
  EXPECT_EQ(lane0(exp2_512(_mm512_set1_ps(-200.0f))), 0.0f);  // below the float range
  EXPECT_TRUE(std::isnan(lane0(exp2_512(_mm512_set1_ps(std::nanf(""))))));
}

TEST(FastMath, ExpWithinItsErrorOverItsRange) {
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.000977) {
    const float xf = static_cast<float>(x);
    const double want = std::exp(static_cast<double>(xf));
    worst = std::max(worst, std::fabs(lane0(exp512(_mm512_set1_ps(xf))) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_TRUE(std::isnan(lane0(exp512(_mm512_set1_ps(std::nanf(""))))));
}

// gelu = x/2 (1 + tanh u) = x s with s = 1 / (1 + e), e = exp(-2u): the sigmoid form, as
// 1 + tanh u cancels for negative x in float64 too (below x = -6 nothing of it is left)
double gelu64(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}
double dgelu64(double x) {  // s + x s (1 - s) 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  const double e = std::exp(-2.0 * u), s = 1.0 / (1.0 + e);
  return s + x * s * (e * s) * 2.0 * std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * x * x);
}

// Both forms (16 lanes, and the scalar one of builds without AVX-512) against float64: gelu
// relative where it is not tiny (the sigmoid form has no cancellation for negative x), gelu'
// absolute (it crosses zero).
TEST(FastMath, GeluAndItsDerivativeFollowFloat64) {
  double g_rel = 0, g_rel_scalar = 0, d_abs = 0, d_abs_scalar = 0;
  for (double x = -12.0; x <= 12.0; x += 0.000731) {
    const float xf = static_cast<float>(x);
    __m512 g, d;
    gelu_and_grad512(_mm512_set1_ps(xf), g, d);
    float gs, ds;
    gelu_and_grad(xf, gs, ds);
    const double G = gelu64(xf), D = dgelu64(xf);
    if (std::fabs(G) > 1e-30) {
      g_rel = std::max(g_rel, std::fabs(lane0(g) - G) / std::fabs(G));
      g_rel_scalar = std::max(g_rel_scalar, std::fabs(gs - G) / std::fabs(G));
    }
    d_abs = std::max(d_abs, std::fabs(lane0(d) - D));
    d_abs_scalar = std::max(d_abs_scalar, std::fabs(ds - D));
  }
  EXPECT_LT(g_rel, 2e-5);  // 9.5e-6 measured, where gelu is near 1e-30
  EXPECT_LT(g_rel_scalar, 2e-5);
  EXPECT_LT(d_abs, 4e-7);  // 1.8e-7 measured
  EXPECT_LT(d_abs_scalar, 4e-7);
}

TEST(FastMath, GeluAtTheEdgesOfTheFloatRange) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {1e20f, 3e38f, inf}) {  // x^2 overflows: gelu(x) = x
    __m512 g, d;
    gelu_and_grad512(_mm512_set1_ps(x), g, d);
    EXPECT_EQ(lane0(g), x) << x;
  }
  for (float x : {-20.0f, -1e20f, -3e38f}) {  // gelu(x) = x s with s below 2^-126: 0
    __m512 g, d;
    gelu_and_grad512(_mm512_set1_ps(x), g, d);
    EXPECT_EQ(lane0(g), 0.0f) << x;
  }
  {  // and its derivative at -20, whose square does not overflow
    __m512 g, d;
    gelu_and_grad512(_mm512_set1_ps(-20.0f), g, d);
    EXPECT_EQ(lane0(d), 0.0f);
  }
  __m512 g, d;
  gelu_and_grad512(_mm512_set1_ps(std::nanf("")), g, d);
  EXPECT_TRUE(std::isnan(lane0(g)));
  EXPECT_TRUE(std::isnan(lane0(d)));
}
#else
TEST(FastMath, NeedsAvx512) { GTEST_SKIP() << "built without AVX-512 (GT_SIMD512 0)"; }
#endif

}  // namespace
