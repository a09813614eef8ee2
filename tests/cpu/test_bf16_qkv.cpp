// The CPU backend's bf16 qkv (Backend::bf16_qkv, cpu::QkvRows): under bf16 with fusion on the
// qkv product writes qkv in bf16 and attention reads it in place. What makes that exact:
//  - the product's bf16 output is its f32 output rounded to nearest even, on the own bf16
//    kernel (AMX or AVX512_BF16) and on oneDNN's product (bias added before the rounding);
//  - every attention form (fused on the own kernels or oneDNN's products, stored att) and
//    operand type (bf16, emulated bf16, f32) gives, from a bf16 qkv, bit for bit what it gives
//    from the f32 qkv of the same values, which under bf16 operands it rounds as it packs;
//  - the backend asks for a bf16 qkv exactly where the CPU has bf16 products.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/amx_matmul.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/fast_math.h"
#include "backend/cpu/onednn_matmul.h"
#include "test_helpers.h"  // test::randn, test::DeviceVectors (tests/engine)

namespace gt {
namespace {

using cpu::AttnKernels;
using cpu::AttnType;

TEST(Bf16QkvCpu, AskedForWhereTheCpuHasBf16Products) {
  const bool native = cpu::onednn_supports(cpu::MmType::bf16);
  EXPECT_EQ(cpu::Attention::takes_bf16_qkv(128, 2), native);
  EXPECT_EQ(cpu::Attention::takes_bf16_qkv(96, 2), native);
  EXPECT_FALSE(cpu::Attention::takes_bf16_qkv(100, 3));  // C not a multiple of NH
  auto be = make_backend("cpu");
  EXPECT_EQ(be->bf16_qkv(128, 4), native);
  const bool was = cpu::lowp_emulation_forced();  // restored after
  cpu::set_lowp_emulation(true);                  // bf16 emulated: no bf16 qkv asked for
  EXPECT_FALSE(cpu::Attention::takes_bf16_qkv(128, 2));
  cpu::set_lowp_emulation(was);
}

TEST(Bf16QkvCpu, TheQkvProductsBf16OutputIsItsF32OutputRounded) {
  if (!cpu::onednn_supports(cpu::MmType::bf16)) GTEST_SKIP() << "this CPU has no bf16 products";
  auto be = make_backend("cpu");
  be->set_precision(Precision::bf16);
  const int64_t N = 140;
  const int C = 128, OC = 384;
  const auto x = test::randn(N * C, 1), w = test::randn(int64_t(C) * OC, 2, 0.1f),
             b = test::randn(OC, 3);
  for (const bool own : {true, false}) {
    cpu::set_own_amx_matmul(own);
    if (own && cpu::own_bf16_kernel() == cpu::Bf16Kernel::none) continue;
    SCOPED_TRACE(own ? cpu::bf16_kernel_name(cpu::own_bf16_kernel()) : "oneDNN's product");
    test::DeviceVectors dv(*be);
    float* dx = dv.up(x);
    float* dw = dv.up(w);
    float* db = dv.up(b);
    float* o32 = dv.up(std::vector<float>(N * OC, NAN));
    float* o16 = dv.up(std::vector<float>(N * OC / 2, NAN));
    be->matmul_forward(o32, dx, dw, db, N, C, OC, false);
    be->matmul_forward(DevPtr(o16, DType::bf16), dx, dw, db, N, C, OC, false);
    const auto f = dv.down(o32, N * OC);
    std::vector<uint16_t> h(N * OC);
    be->copy_to_host(h.data(), o16, h.size() * sizeof(uint16_t));
    for (int64_t i = 0; i < N * OC; ++i) ASSERT_EQ(h[i], cpu::to_bf16(f[i])) << "at " << i;
  }
  cpu::set_own_amx_matmul(true);
}

struct Form {
  AttnType type;
  AttnKernels kernels;
  bool stored;  // att kept (the unfused form)
  const char* name;
};

TEST(Bf16QkvCpu, EveryAttentionFormReadsItAsTheF32OfItsValues) {
  const int B = 2;
  std::vector<Form> forms = {{AttnType::f32, AttnKernels::fastest, false, "f32 fused"},
                             {AttnType::f32, AttnKernels::fastest, true, "f32 stored"},
                             {AttnType::f32_bf16, AttnKernels::fastest, false, "emulated bf16"}};
  if (cpu::onednn_supports(cpu::MmType::bf16))
    for (const auto& f : std::vector<Form>{{AttnType::bf16, AttnKernels::own, false, "own kernels"},
                                           {AttnType::bf16, AttnKernels::onednn, false, "oneDNN"},
                                           {AttnType::bf16, AttnKernels::fastest, true, "stored"}})
      forms.push_back(f);
  for (const auto& [T, C, NH] : {std::tuple{70, 128, 4}, std::tuple{200, 128, 2}}) {
    const int64_t n3 = int64_t(B) * T * 3 * C, nc = int64_t(B) * T * C;
    auto qkv = test::randn(n3, 7, 0.8f);
    std::vector<uint16_t> q16(n3);
    for (int64_t i = 0; i < n3; ++i) {
      q16[i] = cpu::to_bf16(qkv[i]);
      qkv[i] = cpu::bf16_to_float(q16[i]);
    }
    const auto dout = test::randn(nc, 8);
    for (const Form& f : forms) {
      SCOPED_TRACE(::testing::Message() << f.name << ", T " << T << ", C " << C << ", NH " << NH);
      cpu::Attention att;
      att.set_type(f.type);
      att.set_bf16_kernels(f.kernels);
      if (f.kernels == AttnKernels::own && !att.uses_own_bf16_kernels(T, C, NH)) continue;
      std::vector<float> out[2], lse[2], dq[2];
      for (int k = 0; k < 2; ++k) {
        const cpu::QkvRows q = k ? cpu::QkvRows(q16.data()) : cpu::QkvRows(qkv.data());
        std::vector<float> P(f.stored ? int64_t(B) * NH * T * T : 0);
        out[k].assign(nc, NAN);
        lse[k].assign(int64_t(B) * NH * T, NAN);
        dq[k].assign(n3, NAN);
        att.forward(out[k].data(), f.stored ? P.data() : nullptr, lse[k].data(), q, B, T, C, NH);
        att.backward(dq[k].data(), dout.data(), q, f.stored ? P.data() : nullptr, lse[k].data(), B,
                     T, C, NH);
      }
      EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), nc * sizeof(float))) << "out";
      if (!f.stored) {
        EXPECT_EQ(0, std::memcmp(lse[0].data(), lse[1].data(), lse[0].size() * sizeof(float)))
            << "lse";
      }
      EXPECT_EQ(0, std::memcmp(dq[0].data(), dq[1].data(), n3 * sizeof(float))) << "dqkv";
      bool finite = true;
      for (float v : dq[1]) finite &= std::isfinite(v);
      EXPECT_TRUE(finite);
    }
  }
}

}  // namespace
}  // namespace gt
