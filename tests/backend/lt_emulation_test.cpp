// The emulated cuBLASLt (backend/cuda/lt_emulation.h) refuses what the real library refuses,
// so a product the GPU would reject fails on cuda-emu first: fp8 outside the "TN" layout, fp8
// leading dimensions or k not multiples of 16, E5M2 x E5M2, fp8 without scale pointers, the
// epilogues fp8 with an f32 output has not, mixed 16-bit types, and pointers less aligned than
// their type or than the alignment a plan declared. Every product the backend itself issues
// is accepted (the op test and the training tests run them all on cuda-emu). The bias
// gradient epilogues (BGRADA/BGRADB) the backward's dW product takes under bf16 and fp16
// write dout's column sums, which the backend adds to the accumulated dbias.
#include "backend/cuda/lt_emulation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/kernel_math.h"
#include "test_helpers.h"  // test::has_backend, test::DeviceVectors (tests/engine)

namespace gt::cuda_lt {
namespace {

using cuda_plan::Gemm;
using cuda_plan::LtType;

alignas(256) unsigned char buf[4][4096];

/// An fp8 forward product as the backend plans it (A = W^T, TN), all sizes multiples of 16.
Call fp8_call() {
  const Gemm g = cuda_plan::forward_fp8(32, 64, 48);
  return Call{g,      LtType::e4m3, LtType::e4m3, LtType::f32, buf[0],     buf[1],
              buf[2], nullptr,      {},           buf[3],      buf[3] + 16};
}

std::string why(const Call& c) { return refusal(c).why; }

TEST(LtEmulation, TheBackendsPlansAreAccepted) {
  EXPECT_FALSE(refusal(fp8_call()).refused) << why(fp8_call());
  for (bool wt : {false, true}) {
    for (const Gemm& g : {cuda_plan::forward(6, 5, 7, wt), cuda_plan::backward_input(6, 5, 7, wt),
                          cuda_plan::backward_weight(6, 5, 7, wt)}) {
      for (LtType t : {LtType::f32, LtType::bf16, LtType::f16}) {
        const Call c{g, t, t, LtType::f32, buf[0], buf[1], buf[2], nullptr, {}, nullptr, nullptr};
        EXPECT_FALSE(refusal(c).refused) << describe(c) << ": " << why(c);
      }
    }
  }
  Call bias_gelu{cuda_plan::forward(6, 5, 7, false),
                 LtType::bf16,
                 LtType::bf16,
                 LtType::bf16,
                 buf[0],
                 buf[1],
                 buf[2],
                 buf[0],
                 {cuda_plan::LtEpi::gelu},
                 nullptr,
                 nullptr};
  EXPECT_FALSE(refusal(bias_gelu).refused) << why(bias_gelu);
}

// GELU_AUX_BIAS (the MLP's forward writes gelu and its input) and DGELU (its backward reads
// the input): an aux matrix of D's type, ld divisible by 8 and >= m (cublasLt.h); DGELU has no
// bias (DGELU_BGRAD would write one); fp8 with an f32 output has neither.
TEST(LtEmulation, GeluAuxAndDgeluNeedTheirAuxMatrix) {
  using cuda_plan::LtEpi;
  const Gemm fwd = cuda_plan::forward(6, 8, 16, false);  // m = 16 (OC)
  Call c{fwd,          LtType::bf16, LtType::bf16,
         LtType::bf16, buf[0],       buf[1],
         buf[2],       buf[0],       {LtEpi::gelu_aux, buf[3], 16},
         nullptr,      nullptr};
  EXPECT_FALSE(refusal(c).refused) << why(c);
  EXPECT_NE(describe(c).find("gelu_aux+bias (aux ld 16)"), std::string::npos) << describe(c);
  c.ep.aux = nullptr;
  EXPECT_NE(why(c).find("without its aux matrix"), std::string::npos) << why(c);
  c.ep = {LtEpi::gelu_aux, buf[3], 12};
  EXPECT_NE(why(c).find("not divisible by 8 or below"), std::string::npos) << why(c);
  c.ep = {LtEpi::gelu_aux, buf[3] + 1, 16};
  EXPECT_NE(why(c).find("not aligned"), std::string::npos) << why(c);
  c.ep = {LtEpi::none, buf[3], 16};
  EXPECT_NE(why(c).find("an aux matrix with the none epilogue"), std::string::npos) << why(c);
  const Gemm bwd = cuda_plan::backward_input(6, 16, 8, false);  // dinp: m = 16 (C)
  Call d{bwd,          LtType::bf16, LtType::bf16,
         LtType::bf16, buf[0],       buf[1],
         buf[2],       nullptr,      {LtEpi::dgelu, buf[3], 16},
         nullptr,      nullptr};
  EXPECT_FALSE(refusal(d).refused) << why(d);
  d.bias = buf[0];
  EXPECT_NE(why(d).find("DGELU with a bias"), std::string::npos) << why(d);
  Call f = fp8_call();
  f.ep = {LtEpi::gelu_aux, buf[3], f.g.m};
  EXPECT_TRUE(refusal(f).epilogue_only) << why(f);
}

// BGRADA / BGRADB: the bias pointer is the gradient written (D's type, so aligned to it);
// backward_weight's plans reduce dout over the tokens (k) as A (dW (C,OC)) or B (w_transposed).
TEST(LtEmulation, BiasGradientEpiloguesWriteThroughTheBiasPointer) {
  using cuda_plan::LtEpi;
  for (bool wt : {false, true}) {
    const Gemm g = cuda_plan::backward_weight(6, 8, 16, wt);
    const LtEpi e = cuda_plan::bias_gradient_epilogue(g);
    EXPECT_EQ(e, wt ? LtEpi::bgradb : LtEpi::bgrada);
    for (LtType t : {LtType::bf16, LtType::f16}) {
      Call c{g, t, t, LtType::f32, buf[0], buf[1], buf[2], buf[3], {e}, nullptr, nullptr};
      EXPECT_FALSE(refusal(c).refused) << describe(c) << ": " << why(c);
      EXPECT_NE(describe(c).find(wt ? "epilogue bgradb" : "epilogue bgrada"), std::string::npos)
          << describe(c);
      c.bias = nullptr;
      EXPECT_NE(why(c).find("without its bias gradient"), std::string::npos) << why(c);
      c.bias = buf[3] + 2;  // an f32 gradient 2-byte aligned
      EXPECT_NE(why(c).find("bias gradient at"), std::string::npos) << why(c);
      c.bias = buf[3];
      c.ep.aux = buf[0];
      EXPECT_NE(why(c).find("an aux matrix with the bgrad"), std::string::npos) << why(c);
    }
  }
  Call f = fp8_call();
  f.bias = buf[0];
  f.ep.kind = LtEpi::bgrada;
  EXPECT_TRUE(refusal(f).epilogue_only) << why(f);
}

// On cuda-emu under bf16 and fp16 matmul_backward's dbias is the dW product's bias gradient
// epilogue (BGRADA, or BGRADB for w_transposed), added to what dbias held; under fp32 the
// column-sum kernel. Against the column sums of dout as the products read it (rounded).
TEST(LtEmulation, TheBackwardsBiasGradientIsTheEpiloguesAddedToDbias) {
  if (!test::has_backend("cuda-emu")) GTEST_SKIP() << "cuda-emu is not in this build";
  const int64_t N = 6;
  const int C = 8, OC = 16;
  std::vector<float> inp(N * C), w(int64_t(C) * OC), dout(N * OC), db0(OC);
  for (size_t i = 0; i < inp.size(); ++i) inp[i] = std::sin(0.7 * i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * std::cos(0.3 * i);
  for (size_t i = 0; i < dout.size(); ++i) dout[i] = std::sin(1.3 * i + 0.2) * 1.7f;
  for (int o = 0; o < OC; ++o) db0[o] = 0.25f * o - 1.0f;
  for (Precision prec : {Precision::fp32, Precision::bf16, Precision::fp16})
    for (bool wt : {false, true}) {
      auto be = make_backend("cuda-emu");
      be->set_precision(prec);
      test::DeviceVectors dv(*be);
      float* d_dw = dv.up(std::vector<float>(w.size(), 0.f));
      float* d_db = dv.up(db0);
      record_products(true);
      be->matmul_backward(nullptr, d_dw, d_db, ConstDevPtr(dv.up(dout)), ConstDevPtr(dv.up(inp)),
                          dv.up(w), N, C, OC, wt);
      const std::vector<float> db = dv.down(d_db, OC);
      record_products(false);
      std::string log;
      for (const std::string& p : recorded_products()) log += p + "\n";
      const bool epilogue = prec != Precision::fp32;
      EXPECT_EQ(log.find(wt ? "epilogue bgradb" : "epilogue bgrada") != std::string::npos, epilogue)
          << to_string(prec) << ", w_transposed " << wt << ":\n"
          << log;
      for (int o = 0; o < OC; ++o) {
        double s = db0[o];
        for (int64_t i = 0; i < N; ++i) {
          const float x = dout[i * OC + o];
          namespace m = cuda_math;  // the rounding of the backend's round16
          s += prec == Precision::bf16   ? m::bf16_to_float(m::to_bf16(x))
               : prec == Precision::fp16 ? m::f16_to_float(m::to_f16(x))
                                         : x;
        }
        EXPECT_NEAR(db[o], s, 1e-5) << to_string(prec) << ", w_transposed " << wt << ", " << o;
      }
    }
}

TEST(LtEmulation, Fp8OutsideTheTnLayoutIsRefused) {
  Call c = fp8_call();
  c.g.ta = false;
  EXPECT_NE(why(c).find("TN"), std::string::npos) << why(c);
  c = fp8_call();
  c.g.tb = true;
  EXPECT_NE(why(c).find("TN"), std::string::npos) << why(c);
}

TEST(LtEmulation, Fp8SizesAndTypesCuBlasLtHasNoKernelForAreRefused) {
  Call c = fp8_call();
  c.g.k = 40;
  c.g.lda = c.g.ldb = 40;
  EXPECT_NE(why(c).find("multiples of 16"), std::string::npos) << why(c);
  c = fp8_call();
  c.a = c.b = LtType::e5m2;
  EXPECT_NE(why(c).find("E5M2 x E5M2"), std::string::npos) << why(c);
  c = fp8_call();
  c.b = LtType::bf16;
  EXPECT_NE(why(c).find("non-fp8"), std::string::npos) << why(c);
  c = fp8_call();
  c.scale_b = nullptr;
  EXPECT_NE(why(c).find("scale pointer"), std::string::npos) << why(c);
  c.scale_b = buf[3] + 4;  // 4-byte aligned: refused on an H200
  EXPECT_NE(why(c).find("aligned to 4 bytes, not 16"), std::string::npos) << why(c);
  c = fp8_call();
  c.a = LtType::e5m2;  // e5m2 gradients x e4m3: a kernel exists
  EXPECT_FALSE(refusal(c).refused) << why(c);
}

TEST(LtEmulation, EpiloguesFp8HasNotAreRefusedAsEpiloguesOnly) {
  Call c = fp8_call();
  c.ep.kind = cuda_plan::LtEpi::gelu;
  EXPECT_TRUE(refusal(c).refused);
  EXPECT_TRUE(refusal(c).epilogue_only) << "the caller may apply the GELU itself";
  c = fp8_call();
  c.bias = buf[0];
  EXPECT_TRUE(refusal(c).epilogue_only) << why(c);
}

TEST(LtEmulation, PointersLessAlignedThanTheirTypeOrThePlanAreRefused) {
  Call c = fp8_call();
  c.pa = buf[0] + 8;  // fp8 needs 16 bytes
  EXPECT_NE(why(c).find("aligned to 8 bytes, below the 16"), std::string::npos) << why(c);
  Call f{cuda_plan::forward(6, 5, 7, false),
         LtType::f32,
         LtType::f32,
         LtType::f32,
         buf[0] + 2,
         buf[1],
         buf[2],
         nullptr,
         {},
         nullptr,
         nullptr};
  EXPECT_NE(why(f).find("A at"), std::string::npos) << "a float at 2 bytes: " << why(f);
  f.pa = buf[0] + 16;
  f.g.align_a = 256;  // a plan kept for pointers aligned to 256 bytes
  EXPECT_NE(why(f).find("the plan declared"), std::string::npos) << why(f);
  f.pa = buf[0] + 256;
  EXPECT_FALSE(refusal(f).refused) << why(f);
}

TEST(LtEmulation, MixedTypesAndBadLeadingDimensionsAreRefused) {
  Call c{cuda_plan::forward(6, 5, 7, false),
         LtType::bf16,
         LtType::f16,
         LtType::f32,
         buf[0],
         buf[1],
         buf[2],
         nullptr,
         {},
         nullptr,
         nullptr};
  EXPECT_NE(why(c).find("two types"), std::string::npos) << why(c);
  c.b = LtType::bf16;
  c.g.ldd = 3;
  EXPECT_NE(why(c).find("leading dimension"), std::string::npos) << why(c);
}

TEST(LtEmulation, CallsAreLoggedWithoutPointers) {
  record_products(true);
  record(fp8_call());
  record_products(false);
  record(fp8_call());
  const auto log = recorded_products();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0],
            "A e4m3 T (lda 64), B e4m3 N (ldb 64) -> D f32 (ldd 48): m 48, n 32, k 64, beta 0, "
            "epilogue none");
}

}  // namespace
}  // namespace gt::cuda_lt
