// The 16-bit weight copies the fused AdamW step writes (cpu/lowp_operands.h update_targets,
// round_span, rewritten; CpuBackend::adamw_step): which copies an update may write, that the
// written ones survive exactly one weights_updated(), and that the CPU backend's adamw_step
// does keep them (the products after the step then never re-round the weights: seen here by
// writing other weights behind the backend's back, which the kept copies ignore).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/fast_math.h"
#include "backend/cpu/lowp_operands.h"
#include "backend/cpu/onednn_matmul.h"
#include "test_helpers.h"  // test::randn (tests/engine)

namespace gt {
namespace {

using test::randn;

// The copy's values (bf16 bits) for n floats at w, read through weight().
std::vector<uint16_t> copy_of(cpu::LowpOperands& l, const float* w, int64_t n) {
  const auto* p = static_cast<const uint16_t*>(l.weight(w, n));
  return std::vector<uint16_t>(p, p + n);
}

// x's values written into w's storage (the copies are keyed by the address: w must not move).
void overwrite(std::vector<float>& w, const std::vector<float>& x) {
  ASSERT_EQ(w.size(), x.size());
  std::copy(x.begin(), x.end(), w.begin());
}

std::vector<uint16_t> bf16_of(const std::vector<float>& x) {
  std::vector<uint16_t> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = cpu::to_bf16(x[i]);
  return r;
}

TEST(WeightCopies, AnUpdateKeepsTheCopiesItRewroteForOneWeightsUpdated) {
  if (cpu::LowpOperands::emulated_here(cpu::LowpFormat::bf16))
    GTEST_SKIP() << "no native bf16 product on this CPU: no copy is written by an update";
  cpu::LowpOperands l;
  l.set_format(cpu::LowpFormat::bf16);
  std::vector<float> w1 = randn(3000, 1), w2 = randn(500, 2);
  EXPECT_EQ(copy_of(l, w1.data(), 3000), bf16_of(w1));
  copy_of(l, w2.data(), 500);
  const auto& t = l.update_targets();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_TRUE(std::less<>()(t[0].w, t[1].w)) << "sorted by address";
  // an "update": new weights, w1's copy written by round_span, w2's not
  const std::vector<float> w1_new = randn(3000, 3), w2_new = randn(500, 4);
  overwrite(w1, w1_new);
  overwrite(w2, w2_new);
  const auto& c1 = t[0].w == w1.data() ? t[0] : t[1];
  l.round_span(c1.out, w1.data(), 1000);  // in two pieces, as AdamW's chunks
  l.round_span(c1.out + 1000, w1.data() + 1000, 2000);
  l.rewritten(w1.data());
  l.weights_updated();
  // w1's floats changed behind its back: the kept copy must not be made again from them
  overwrite(w1, randn(3000, 5));
  EXPECT_EQ(copy_of(l, w1.data(), 3000), bf16_of(w1_new)) << "the written copy was not kept";
  EXPECT_EQ(copy_of(l, w2.data(), 500), bf16_of(w2_new)) << "an unwritten copy was kept";
  // only for one weights_updated()
  l.weights_updated();
  EXPECT_EQ(copy_of(l, w1.data(), 3000), bf16_of(w1));
}

TEST(WeightCopies, NoUpdateTargetsUnderStochasticRoundingOrEmulation) {
  cpu::LowpOperands l;
  l.set_format(cpu::LowpFormat::bf16);
  const std::vector<float> w = randn(64, 1);
  l.weight(w.data(), 64);
  if (!l.emulated()) {
    EXPECT_EQ(l.update_targets().size(), 1u);
  }
  l.set_stochastic_rounding(true, 9);
  l.weight(w.data(), 64);
  EXPECT_TRUE(l.update_targets().empty()) << "stochastic rounding: the copies are not RNE";
  l.set_stochastic_rounding(false, 0);
  const bool was = cpu::lowp_emulation_forced();  // restored after
  cpu::set_lowp_emulation(true);
  l.set_format(cpu::LowpFormat::bf16);
  l.weight(w.data(), 64);
  EXPECT_TRUE(l.update_targets().empty()) << "emulated: the copies hold f32";
  cpu::set_lowp_emulation(was);
}

// The CPU backend's adamw_step under bf16 writes the copies and keeps them across the
// weights_updated() that follows: weights written after that, without another
// weights_updated() (breaking the contract on purpose), leave the products unchanged. A
// weight of 32768 elements: its copy spans two of AdamW's chunks.
TEST(WeightCopies, TheCpuBackendsAdamWStepKeepsTheCopiesItWrote) {
  if (cpu::LowpOperands::emulated_here(cpu::LowpFormat::bf16))
    GTEST_SKIP() << "no native bf16 product on this CPU: the step writes no copy";
  const int64_t N = 32;
  const int C = 256, OC = 128;
  const int64_t n = int64_t(C) * OC;
  auto be = make_backend("cpu");
  be->set_precision(Precision::bf16);
  std::vector<float> p = randn(n, 1, 0.2f), m(n, 0.f), v(n, 0.f);
  const std::vector<float> g = randn(n, 2, 0.5f), inp = randn(N * C, 3);
  std::vector<float> out(N * OC);
  auto product = [&] {
    be->matmul_forward(out.data(), inp.data(), p.data(), nullptr, N, C, OC);
    return out;
  };
  product();  // the copy of the old weights
  float* pp = p.data();
  float* mp = m.data();
  float* vp = v.data();
  const float* gp = g.data();
  const float wd = 0.1f;
  AdamStep s;
  s.p = &pp;
  s.g = &gp;
  s.m = &mp;
  s.v = &vp;
  s.n = &n;
  s.wd = &wd;
  s.count = 1;
  s.grads = gp;
  s.grads_n = n;
  s.clip = 1.0;
  s.lr = 1e-2f;
  be->adamw_step(s);
  be->weights_updated();
  const std::vector<float> updated = p;
  overwrite(p, randn(n, 4, 0.2f));  // behind the backend's back
  const auto kept = product();
  overwrite(p, updated);
  be->weights_updated();  // the contract kept: made again from the updated weights
  EXPECT_EQ(kept, product()) << "the step's copy was not kept, or differs from a fresh one";
}

}  // namespace
}  // namespace gt
