// tests/energy/accumulator_test.cpp: counters that wrap, go backwards or fail; gauges.
#include "energy/accumulator.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace gt::energy {
using namespace test;

TEST(Accumulator, CounterWrapsOnceAtRange) {
  Accumulator a(SensorKind::kEnergyCounter, 100.0);
  EXPECT_FALSE(a.add(0, energy(90)));
  auto iv = a.add(1, energy(10));  // 90 -> 100 (wrap) -> 10: 20 J
  ASSERT_TRUE(iv);
  EXPECT_TRUE(iv->trusted);
  EXPECT_TRUE(iv->wrapped);
  EXPECT_DOUBLE_EQ(iv->energy_j, 20.0);
  EXPECT_DOUBLE_EQ(*iv->power_w, 20.0);
}

TEST(Accumulator, CounterGoingBackwardsWithoutRangeIsFlaggedAndFilledNeverNegative) {
  Accumulator a(SensorKind::kEnergyCounter, std::nullopt);
  a.add(0, energy(100));
  a.add(1, energy(150));          // 50 W trusted
  auto iv = a.add(2, energy(5));  // driver reload: backwards
  ASSERT_TRUE(iv);
  EXPECT_FALSE(iv->trusted);
  EXPECT_FALSE(iv->unknown);
  EXPECT_DOUBLE_EQ(iv->energy_j, 50.0);  // filled with the last trusted 50 W x 1 s
  EXPECT_NE(iv->note.find("backwards"), std::string::npos);
  auto next = a.add(3, energy(45));  // counting resumes from the new base
  EXPECT_TRUE(next->trusted);
  EXPECT_DOUBLE_EQ(next->energy_j, 40.0);
}

TEST(Accumulator, BackwardsStepThatIsNoPlausibleWrapIsAReset) {
  // RAPL range 262143 J: a wrap-corrected step of ~183 kJ in 0.1 s would be 1.8 MW.
  Accumulator a(SensorKind::kEnergyCounter, 262143.0);
  a.add(0, energy(80000));
  a.add(0.1, energy(80010));
  auto iv = a.add(0.2, energy(3));
  EXPECT_FALSE(iv->trusted);
  EXPECT_NEAR(iv->energy_j, 10.0, 1e-9);  // 100 W x 0.1 s
}

TEST(Accumulator, FailedReadingIsUntrustedNotZero) {
  Accumulator a(SensorKind::kEnergyCounter, std::nullopt);
  a.add(0, energy(0));
  a.add(1, energy(30));
  auto iv = a.add(2, failed("EIO"));
  EXPECT_FALSE(iv->trusted);
  EXPECT_DOUBLE_EQ(iv->energy_j, 30.0);
  EXPECT_NE(iv->note.find("EIO"), std::string::npos);
}

TEST(Accumulator, NoTrustedPowerYetMarksUnknown) {
  Accumulator a(SensorKind::kEnergyCounter, std::nullopt);
  a.add(0, energy(100));
  auto iv = a.add(1, energy(50));
  EXPECT_FALSE(iv->trusted);
  EXPECT_TRUE(iv->unknown);
  EXPECT_GE(iv->energy_j, 0.0);
}

TEST(Accumulator, GaugeTrapezoid) {
  Accumulator a(SensorKind::kPowerGauge, std::nullopt);
  a.add(0, power(100));
  auto iv = a.add(2, power(200));
  EXPECT_DOUBLE_EQ(iv->energy_j, 300.0);
  EXPECT_DOUBLE_EQ(*iv->power_w, 150.0);
}

TEST(Accumulator, ZeroLengthIntervalHasNoPower) {
  Accumulator a(SensorKind::kEnergyCounter, std::nullopt);
  a.add(5, energy(1));
  auto iv = a.add(5, energy(1));
  EXPECT_DOUBLE_EQ(iv->energy_j, 0.0);
  EXPECT_FALSE(iv->power_w.has_value());
}

// Issue 12, part 5: a counter read every 0.1 s that dips once and comes back. The truth is the
// rise from first to last reading, 60 J; the dipped value must not become the base.
TEST(Accumulator, CounterThatDipsAndRecoversKeepsThePreDipBase) {
  Accumulator a(SensorKind::kEnergyCounter, std::nullopt);
  const double mj[] = {1000000, 1010000, 1020000, 1019990, 1040000, 1050000, 1060000};
  double total = 0, untrusted_s = 0;
  for (int i = 0; i < 7; ++i) {
    auto iv = a.add(0.1 * i, energy(mj[i] * 1e-3));
    if (!iv) continue;
    total += iv->energy_j;
    if (!iv->trusted) untrusted_s += iv->t1_s - iv->t0_s;
  }
  EXPECT_NEAR(total, 60.0, 1e-9);
  EXPECT_NEAR(untrusted_s, 0.1, 1e-9);  // only the dipped interval was a fill
  // After the recovery, counting goes on from the recovered value at the true power.
  EXPECT_NEAR(*a.last_power_w(), 100.0, 1e-6);
}

TEST(Accumulator, DipOverSeveralReadingsThenRecovery) {
  Accumulator a(SensorKind::kEnergyCounter, std::nullopt);
  double total = 0;
  for (auto [t, j] :
       {std::pair{0.0, 100.0}, {1.0, 110.0}, {2.0, 105.0}, {3.0, 104.0}, {4.0, 140.0}}) {
    if (auto iv = a.add(t, energy(j))) total += iv->energy_j;
  }
  EXPECT_NEAR(total, 40.0, 1e-9);
}

TEST(Accumulator, RecoveryBelowTheFillIsFlaggedNotNegative) {
  Accumulator a(SensorKind::kEnergyCounter, std::nullopt);
  a.add(0, energy(0));
  a.add(1, energy(100));           // 100 W
  auto d = a.add(2, energy(90));   // dip: filled with 100 J
  auto r = a.add(3, energy(120));  // only 20 J since the dip
  ASSERT_TRUE(d && r);
  EXPECT_DOUBLE_EQ(d->energy_j, 100.0);
  EXPECT_DOUBLE_EQ(r->energy_j, 0.0);
  EXPECT_FALSE(r->trusted);
  EXPECT_NE(r->note.find("80.000 J too high"), std::string::npos) << r->note;
}

}  // namespace gt::energy
