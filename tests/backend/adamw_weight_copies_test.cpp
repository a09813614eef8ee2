// Backend::adamw_step followed by weights_updated(): the products that follow use the updated
// weights, bit for bit as a backend that never saw the old ones. The CPU backend writes the
// 16-bit copies of the weights its native bf16 and fp16 products take inside the AdamW pass
// (only copies whose whole tensor the step updated; Debian 12's oneDNN 2.6 has no native f16
// product, so there fp16's copies are made as before, and on a CPU without bf16 instructions bf16's
// too: tests/cpu/test_weight_copies.cpp checks that the copies are kept where they can be).
// This checks the contract on every backend and precision, with pieces that cover a weight
// whole, in part, or together with its neighbours in one piece, and under stochastic
// rounding of the copies.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "op_harness.h"    // test::normal
#include "test_helpers.h"  // test::has_backend, test::DeviceVectors (tests/engine)

namespace gt {
namespace {

constexpr int64_t N = 32;  // rows of the products' input
// each weight: (C, OC), K = C a multiple of 32 (AMX), more elements than one of the CPU
// backend's AdamW chunks (16384)
constexpr int C = 256, OC = 128;
constexpr int64_t kW = int64_t(C) * OC;
constexpr int64_t kBias = 40;              // a tensor between the two weights that no product takes
constexpr int64_t kAll = kW + kBias + kW;  // the parameter buffer: w1, bias, w2

// How the step's pieces cover the parameters.
enum class Cover { tensors, one_piece, half_of_w1 };

struct Pieces {
  std::vector<float*> p, m, v;
  std::vector<const float*> g;
  std::vector<int64_t> n;
  std::vector<float> wd;
};

Pieces pieces_of(Cover c, float* P, const float* G, float* M, float* V) {
  Pieces s;
  auto add = [&](int64_t at, int64_t n, float wd) {
    s.p.push_back(P + at);
    s.g.push_back(G + at);
    s.m.push_back(M + at);
    s.v.push_back(V + at);
    s.n.push_back(n);
    s.wd.push_back(wd);
  };
  switch (c) {
    case Cover::tensors:  // one piece per tensor, as the trainer's whole-tensor pieces
      add(0, kW, 0.1f);
      add(kW, kBias, 0.0f);
      add(kW + kBias, kW, 0.1f);
      break;
    case Cover::one_piece:  // every tensor in one piece: chunks cut at the copies' ends
      add(0, kAll, 0.1f);
      break;
    case Cover::half_of_w1:  // w1 updated in part, the rest written apart: made again
      add(kW / 2, kW / 2 + kBias, 0.1f);
      add(kW + kBias, kW, 0.1f);
      break;
  }
  return s;
}

// The products' outputs (f32) for w1 and w2 from the weights at P.
std::vector<float> products(Backend& be, test::DeviceVectors& dv, const float* d_inp,
                            const float* P) {
  float* out = dv.up(std::vector<float>(2 * N * OC, NAN));
  be.matmul_forward(out, d_inp, P, nullptr, N, C, OC);
  be.matmul_forward(out + N * OC, d_inp, P + kW + kBias, nullptr, N, C, OC);
  be.synchronize();
  return dv.down(out, 2 * N * OC);
}

class AdamWWeightCopies
    : public ::testing::TestWithParam<std::tuple<std::string, Precision, Cover, bool>> {};

TEST_P(AdamWWeightCopies, ProductsAfterTheStepUseTheUpdatedWeights) {
  const auto& [name, prec, cover, stochastic] = GetParam();
  if (!test::has_backend(name)) GTEST_SKIP() << name << " is not in this build";
  auto make = [&] {
    auto be = make_backend(name);
    be->set_precision(prec);
    be->set_stochastic_rounding(stochastic, 7);
    return be;
  };
  const auto params = test::normal(kAll, 1, 0.2f), inp = test::normal(N * C, 2),
             grads = test::normal(kAll, 3, 0.5f);
  auto be = make();
  test::DeviceVectors dv(*be);
  float* P = dv.up(params);
  const float* G = dv.up(grads);
  float* M = dv.up(std::vector<float>(kAll, 0.f));
  float* V = dv.up(std::vector<float>(kAll, 0.f));
  const float* d_inp = dv.up(inp);

  const auto before = products(*be, dv, d_inp, P);  // makes the 16-bit copies, if any
  Pieces pc = pieces_of(cover, P, G, M, V);
  AdamStep s;
  s.p = pc.p.data();
  s.g = pc.g.data();
  s.m = pc.m.data();
  s.v = pc.v.data();
  s.n = pc.n.data();
  s.wd = pc.wd.data();
  s.count = static_cast<int>(pc.n.size());
  s.grads = G;
  s.grads_n = kAll;
  s.clip = 1.0;
  s.lr = 1e-2f;  // large enough that most bf16 weights change
  s.t = 1;
  const AdamStepResult* r = be->adamw_step(s);
  be->synchronize();
  ASSERT_EQ(r->nonfinite_state == 1, false);
  if (cover == Cover::half_of_w1) {  // the other half arrives from elsewhere (as ZeRO's gather)
    const auto other = test::normal(kW / 2, 4, 0.2f);
    be->copy_to_device(P, other.data(), other.size() * sizeof(float));
  }
  be->weights_updated();
  const auto after = products(*be, dv, d_inp, P);
  const auto updated = dv.down(P, kAll);

  // a backend that never saw the old weights, the same products in the same order
  auto fresh = make();
  test::DeviceVectors fv(*fresh);
  const auto expected = products(*fresh, fv, fv.up(inp), fv.up(updated));
  ASSERT_EQ(after.size(), expected.size());
  int64_t differ = 0, changed = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    differ += after[i] != expected[i];  // bit for bit (neither is NaN: checked below)
    changed += after[i] != before[i];
    ASSERT_FALSE(std::isnan(after[i])) << "output " << i;
  }
  EXPECT_EQ(differ, 0) << "of " << after.size() << " outputs (first product: w1, then w2)";
  EXPECT_GT(changed, (int64_t)after.size() / 2) << "the step barely changed the products";
}

std::string case_name(
    const ::testing::TestParamInfo<std::tuple<std::string, Precision, Cover, bool>>& i) {
  const auto& [name, prec, cover, stochastic] = i.param;
  return fmt::format("{}_{}_{}{}", name == "cuda-emu" ? "cuda_emu" : name, to_string(prec),
                     cover == Cover::tensors     ? "tensors"
                     : cover == Cover::one_piece ? "one_piece"
                                                 : "half",
                     stochastic ? "_stochastic" : "");
}

// Every backend and precision it computes in (ref: fp32 only); stochastic rounding under bf16.
std::vector<std::tuple<std::string, Precision, Cover, bool>> cases() {
  std::vector<std::tuple<std::string, Precision, Cover, bool>> v;
  for (const char* be : {"ref", "cpu", "cuda-emu"})
    for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
      for (Cover c : {Cover::tensors, Cover::one_piece, Cover::half_of_w1})
        for (bool sr : {false, true})
          if ((p == Precision::fp32 || std::string(be) != "ref") && (!sr || p == Precision::bf16))
            v.emplace_back(be, p, c, sr);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Backends, AdamWWeightCopies, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace gt
