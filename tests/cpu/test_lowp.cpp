// The CPU backend's bf16 products where oneDNN has none with bf16 instructions
// (cpu/lowp_operands.h: AMD Zen 3, Intel Skylake to Ice Lake), forced here on any CPU with
// cpu::set_lowp_emulation (ctest also runs these tests with oneDNN capped at avx512_core,
// cpu_tests_onednn_avx512_core): the operands
// are rounded to bf16 and multiplied in f32, so a bf16 product must equal, bit for bit, the
// fp32 backend's product of the rounded operands, differ from the product of the unrounded
// ones, and stay within bf16's tolerance of a float64 reference; bf16 tensors handed in
// (activations, GELU's gradient) and bf16 outputs must give the values of the f32 hand-over.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/amx_matmul.h"
#include "backend/cpu/fast_math.h"
#include "backend/cpu/lowp_operands.h"
#include "backend/cpu/onednn_matmul.h"
#include "test_helpers.h"  // test::randn (tests/engine)

namespace gt {
namespace {

using test::randn;

std::vector<float> rounded(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = cpu::bf16_to_float(cpu::to_bf16(x[i]));
  return r;
}

std::vector<uint16_t> to16(const std::vector<float>& x) {
  std::vector<uint16_t> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = cpu::to_bf16(x[i]);
  return r;
}

/// The emulated form on (or the CPU's own form, off) for one scope.
struct Emulation {
  const bool before = cpu::lowp_emulation_forced();
  explicit Emulation(bool on) { cpu::set_lowp_emulation(on); }
  ~Emulation() { cpu::set_lowp_emulation(before); }
};

/// max |a - b| / max |b|
double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(a[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / den;
}

constexpr int N = 48, C = 40, OC = 72;

struct Products {
  std::vector<float> out, dinp, dw, db;
};

/// Forward and backward of one linear layer on a fresh backend under precision p.
Products run_layer(Precision p, const std::vector<float>& inp, const std::vector<float>& w,
                   const std::vector<float>& bias, const std::vector<float>& dout) {
  auto be = make_backend("cpu");
  be->set_precision(p);
  Products r{std::vector<float>(N * OC), std::vector<float>(N * C), std::vector<float>(C * OC, 0.f),
             std::vector<float>(OC, 0.f)};
  be->matmul_forward(r.out.data(), inp.data(), w.data(), bias.data(), N, C, OC);
  be->matmul_backward(r.dinp.data(), r.dw.data(), r.db.data(), dout.data(), inp.data(), w.data(), N,
                      C, OC);
  return r;
}

TEST(Bf16Emulated, EqualsTheFp32ProductOfRoundedOperandsBitForBit) {
  const auto inp = randn(N * C, 1), w = randn(C * OC, 2, 0.1f), bias = randn(OC, 3),
             dout = randn(N * OC, 4);
  for (bool forced : {true, false}) {
    Emulation e(forced);
    if (!forced && cpu::onednn_supports(cpu::MmType::bf16)) continue;  // the CPU's own bf16
    const Products b16 = run_layer(Precision::bf16, inp, w, bias, dout);
    const Products ref = run_layer(Precision::fp32, rounded(inp), rounded(w), bias, rounded(dout));
    EXPECT_EQ(b16.out, ref.out) << "forced " << forced;
    EXPECT_EQ(b16.dinp, ref.dinp);
    EXPECT_EQ(b16.dw, ref.dw);
    EXPECT_EQ(b16.db, ref.db);  // the bias gradient sums the rounded dout
    // not secretly fp32: the unrounded operands give other values
    const Products f32 = run_layer(Precision::fp32, inp, w, bias, dout);
    EXPECT_NE(b16.out, f32.out);
    EXPECT_NE(b16.dw, f32.dw);
  }
}

TEST(Bf16Emulated, IsWithinBf16ToleranceOfFloat64AndOfTheNativeForm) {
  const auto inp = randn(N * C, 5), w = randn(C * OC, 6, 0.1f), bias = randn(OC, 7),
             dout = randn(N * OC, 8);
  std::vector<double> ref(N * OC);
  for (int i = 0; i < N; ++i)
    for (int o = 0; o < OC; ++o) {
      double s = bias[o];
      for (int c = 0; c < C; ++c) s += (double)inp[i * C + c] * w[c * OC + o];
      ref[i * OC + o] = s;
    }
  Products emu;
  {
    Emulation e(true);
    emu = run_layer(Precision::bf16, inp, w, bias, dout);
  }
  const double err = rel_err(emu.out, ref);
  EXPECT_LT(err, 1e-2);  // operands to 8 significant bits
  EXPECT_GT(err, 1e-5);  // and rounded: fp32 is near 1e-7
  // the CPU's own form (native bf16 where it has one): the same products, only the order of
  // the f32 sums may differ
  const Products own = run_layer(Precision::bf16, inp, w, bias, dout);
  std::vector<double> emu_d(emu.out.begin(), emu.out.end());
  EXPECT_LT(rel_err(own.out, emu_d), 1e-5);
}

// bf16 tensors in and out: a bf16 input (an activation stored in bf16), GELU's bf16 output and
// a bf16 GELU gradient as the multiplier of the backward product, in the emulated form: the
// values of the f32 hand-over of the same (bf16-exact) values, rounded where the output is bf16.
TEST(Bf16Emulated, Bf16TensorsInAndOutMatchTheF32HandOver) {
  Emulation e(true);
  auto be = make_backend("cpu");
  be->set_precision(Precision::bf16);
  const auto inp = rounded(randn(N * C, 11)), w = randn(C * OC, 12, 0.1f), bias = randn(OC, 13);
  const auto inp16 = to16(inp);
  // forward: GELU(inp @ w + bias) into f32 and into bf16
  std::vector<float> out(N * OC);
  std::vector<uint16_t> out16(N * OC);
  be->matmul_gelu_forward(out.data(), inp.data(), w.data(), bias.data(), N, C, OC);
  be->matmul_gelu_forward(DevPtr(out16.data(), DType::bf16), ConstDevPtr(inp16.data(), DType::bf16),
                          w.data(), bias.data(), N, C, OC);
  for (int i = 0; i < N * OC; ++i) ASSERT_EQ(out16[i], cpu::to_bf16(out[i])) << i;
  // backward through a GELU gradient: dinp = (dout @ w^T) * dgelu, f32 or bf16 dgelu and dinp
  const auto dout = randn(N * OC, 14), dgelu = rounded(randn(N * C, 15));
  const auto dgelu16 = to16(dgelu);
  const auto w2 = randn(C * OC, 16, 0.1f);  // (C, OC): this product's dinp is (N, C)
  std::vector<float> dinp(N * C), dw(C * OC, 0.f), dw16(C * OC, 0.f);
  std::vector<uint16_t> dinp16(N * C);
  be->matmul_backward_gelu(dinp.data(), dw.data(), nullptr, dout.data(), inp.data(), w2.data(),
                           dgelu.data(), N, C, OC);
  be->matmul_backward_gelu(DevPtr(dinp16.data(), DType::bf16), dw16.data(), nullptr, dout.data(),
                           ConstDevPtr(inp16.data(), DType::bf16), w2.data(),
                           ConstDevPtr(dgelu16.data(), DType::bf16), N, C, OC);
  for (int i = 0; i < N * C; ++i) ASSERT_EQ(dinp16[i], cpu::to_bf16(dinp[i])) << i;
  EXPECT_EQ(dw, dw16);
}

// What the run's header and summary.json say ran the products (Backend::product_path): fp32 on
// oneDNN; bf16 emulated exactly where the products are (LowpOperands::emulated_here, the one
// rule product() follows), else on the own kernel where there is one, with its measured share of
// the FLOPs (0 for products it does not take, 1 for those it does); with emulation forced, bf16
// and fp16 EMULATED with the reason, as on a CPU without such instructions (AMD Zen 3).
TEST(ProductPath, SaysWhatRunsTheProductsAndWhenTheyAreEmulated) {
  const std::string isa = cpu::onednn_isa_name();
  EXPECT_FALSE(isa.empty());
  auto be = make_backend("cpu");
  be->set_precision(Precision::fp32);
  auto p = be->product_path();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->precision, "fp32");
  EXPECT_EQ(p->kernel, "oneDNN");
  EXPECT_EQ(p->isa, isa);
  EXPECT_FALSE(p->emulated);
  EXPECT_TRUE(p->emulated_reason.empty());

  be->set_precision(Precision::bf16);
  p = be->product_path();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->precision, "bf16");
  const bool emulated = cpu::LowpOperands::emulated_here(cpu::LowpFormat::bf16);
  EXPECT_EQ(p->emulated, emulated);
  if (!cpu::onednn_isa_has_bf16() && !cpu::lowp_emulation_forced()) {
    // no bf16 instructions in oneDNN's instruction set (cpu_tests_onednn_avx512_core caps it)
    EXPECT_TRUE(p->emulated);
    EXPECT_NE(p->emulated_reason.find("(its instruction set: " + isa + ")"), std::string::npos)
        << p->emulated_reason;
  }
  EXPECT_EQ(p->emulated, !p->emulated_reason.empty());
  const bool own = !emulated && cpu::own_bf16_kernel() != cpu::Bf16Kernel::none;
  EXPECT_EQ(p->kernel, own ? cpu::bf16_kernel_name(cpu::own_bf16_kernel()) : "oneDNN");
  EXPECT_FALSE(p->own_share) << "no product has run yet";
  if (own) {
    // a layer whose shared dimensions (C 40, OC 72, N 48) are no multiples of 32: all oneDNN's;
    // then one whose are (64, 96, 64): all the own kernel's, half of the FLOPs so far or more
    std::vector<float> out(N * OC), dinp(N * C), dw(C * OC, 0.f), db(OC, 0.f);
    const auto x = randn(N * C, 1), w = randn(C * OC, 2, 0.1f), dout = randn(N * OC, 4);
    be->matmul_forward(out.data(), x.data(), w.data(), nullptr, N, C, OC);
    be->matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, C,
                        OC);
    ASSERT_TRUE(be->product_path()->own_share);
    EXPECT_EQ(*be->product_path()->own_share, 0.0);
    constexpr int N2 = 64, C2 = 64, OC2 = 96;
    std::vector<float> out2(N2 * OC2), dinp2(N2 * C2), dw2(C2 * OC2, 0.f), db2(OC2, 0.f);
    const auto x2 = randn(N2 * C2, 5), w2 = randn(C2 * OC2, 6, 0.1f), dout2 = randn(N2 * OC2, 7);
    be->matmul_forward(out2.data(), x2.data(), w2.data(), nullptr, N2, C2, OC2);
    be->matmul_backward(dinp2.data(), dw2.data(), db2.data(), dout2.data(), x2.data(), w2.data(),
                        N2, C2, OC2);
    const double first = 3.0 * N * C * OC, second = 3.0 * N2 * C2 * OC2;
    EXPECT_NEAR(*be->product_path()->own_share, second / (first + second), 1e-12);
  }

  {
    const Emulation on(true);
    for (Precision prec : {Precision::bf16, Precision::fp16}) {
      be->set_precision(prec);  // emulation takes effect at the next set_precision
      p = be->product_path();
      ASSERT_TRUE(p);
      EXPECT_EQ(p->precision, to_string(prec));
      EXPECT_EQ(p->kernel, "oneDNN") << "the own kernel takes no emulated product";
      EXPECT_TRUE(p->emulated);
      EXPECT_FALSE(p->own_share);
      EXPECT_NE(p->emulated_reason.find("forced by GT_CPU_EMULATE_LOWP=1"), std::string::npos)
          << p->emulated_reason;
      EXPECT_NE(p->emulated_reason.find(to_string(prec) + "-rounded operands"), std::string::npos)
          << p->emulated_reason;
    }
  }
  be->set_precision(Precision::fp16);  // without emulation forced: as oneDNN can here
  p = be->product_path();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->emulated, cpu::LowpOperands::emulated_here(cpu::LowpFormat::f16));
  if (p->emulated) {
    const std::string why =
        cpu::lowp_emulation_forced()  // GT_CPU_EMULATE_LOWP=1 for the run
            ? "forced by GT_CPU_EMULATE_LOWP=1"
            : "oneDNN has no fp16 product here (its instruction set: " + isa + ")";
    EXPECT_NE(p->emulated_reason.find(why), std::string::npos) << p->emulated_reason;
  }
}

// bf16 on oneDNN's avx512_core (Intel Skylake to Ice Lake, or oneDNN capped there) is oneDNN's
// own emulation of the dot products, 2x the time of the CPU backend's: onednn_supports() says no
// bf16 product without bf16 instructions, so the backend emulates them itself.
TEST(ProductPath, NoOnednnBf16ProductWithoutBf16Instructions) {
  const Emulation off(false);  // (GT_CPU_EMULATE_LOWP=1 would say no on any CPU)
  if (!cpu::onednn_isa_has_bf16()) {
    EXPECT_FALSE(cpu::onednn_supports(cpu::MmType::bf16)) << cpu::onednn_isa_name();
  } else {
    EXPECT_TRUE(cpu::onednn_supports(cpu::MmType::bf16)) << cpu::onednn_isa_name();
  }
}

}  // namespace
}  // namespace gt
