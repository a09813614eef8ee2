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

}  // namespace gt::energy
