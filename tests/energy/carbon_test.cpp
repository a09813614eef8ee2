// tests/energy/carbon_test.cpp: constant and series intensity, integrated against power.
#include "energy/carbon.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "energy/error.h"
#include "energy/replay.h"
#include "test_util.h"

namespace gt::energy {
using namespace test;

// The first rows of lets_wait_awhile_2020/ger_ci.csv (real German grid series, UTC).
const char* kGerHead =
    "Time,Carbon Intensity\n"
    "2019-12-20 00:00:00,218.29003068829462\n"
    "2019-12-20 00:15:00,217.8834341330206\n"
    "2019-12-20 00:30:00,217.49442613204167\n"
    "2019-12-20 00:45:00,217.60302457466918\n"
    "2019-12-20 01:00:00,216.7613572826391\n";

TEST(Carbon, ConstantOneKwh) {
  auto c = CarbonIntensity::constant(300, "test region");
  EXPECT_DOUBLE_EQ(c.integrate_g(0, 3600, 1000), 300.0);  // 1 kW x 1 h at 300 g/kWh
  EXPECT_DOUBLE_EQ(g_co2e(3.6e6, 300), 300.0);
  EXPECT_NE(c.describe().find("test region"), std::string::npos);
}

TEST(Carbon, ParsesNaiveTimesWithUtcOffset) {
  EXPECT_DOUBLE_EQ(*parse_local_time("1970-01-01 00:00:00", 0), 0.0);
  EXPECT_DOUBLE_EQ(*parse_local_time("2019-12-20 00:00:00", 0), 1576800000.0);
  EXPECT_DOUBLE_EQ(*parse_local_time("2019-12-20 01:00:00", 1), 1576800000.0);  // UTC+1
  EXPECT_FALSE(parse_local_time("20/12/2019", 0));
}

TEST(Carbon, RealSeriesHandComputed) {
  TempDir d;
  write_file(d / "ger.csv", kGerHead);
  auto c = CarbonIntensity::from_csv(d / "ger.csv", 0, "DE");
  const double t0 = *parse_local_time("2019-12-20 00:00:00", 0);
  // 1000 W over 00:00-01:00 = 1 kWh; step series: mean of the four 15-min values.
  EXPECT_NEAR(c.integrate_g(t0, t0 + 3600, 1000), 217.81772888200652, 1e-9);
  // 2000 W over 00:10-00:40 = 1 kWh: (5 x 218.29 + 15 x 217.88 + 10 x 217.49) / 30.
  EXPECT_NEAR(c.integrate_g(t0 + 600, t0 + 2400, 2000), 217.8215308919066, 1e-9);
  EXPECT_FALSE(c.out_of_range());
  c.at(t0 - 10);
  EXPECT_TRUE(c.out_of_range());
}

TEST(Carbon, UtcOffsetShiftsTheSeries) {
  TempDir d;
  write_file(d / "ger.csv", kGerHead);
  auto c = CarbonIntensity::from_csv(d / "ger.csv", 2.0);  // the naive times are UTC+2
  const double utc = *parse_local_time("2019-12-19 22:15:00", 0);
  EXPECT_DOUBLE_EQ(c.at(utc), 217.8834341330206);
}

TEST(Carbon, MeterIntegratesSeriesAgainstMeasuredPower) {
  TempDir d;
  write_file(d / "ger.csv", kGerHead);
  write_file(d / "p.csv", "time_s,power_w\n0,1000\n7200,1000\n");
  SensorList s;
  s.push_back(std::make_unique<ReplaySensor>(d / "p.csv", "replay", "gpu"));
  ManualClock clk;
  MeterOptions o = manual_options(d.path);
  o.carbon = CarbonIntensity::from_csv(d / "ger.csv", 0, "DE");
  o.carbon_replay_start_unix_s = *parse_local_time("2019-12-20 00:00:00", 0);
  Meter m(std::move(s), o, clk.clock());
  m.begin_window("hour");
  for (int i = 0; i < 36; ++i) {
    clk.advance(100);
    m.sample_now();
  }
  auto r = m.end_window("hour");
  EXPECT_NEAR(r.energy_j, 3.6e6, 1e-6);
  EXPECT_NEAR(r.g_co2e, 217.81772888200652, 1e-6);
  EXPECT_NE(r.carbon_source.find("DE"), std::string::npos);
}

TEST(Carbon, SharedDataFileLoads) {
  const std::string p = std::string(GT_CARBON_DATA) + "/lets_wait_awhile_2020/ger_ci.csv";
  if (!std::filesystem::exists(p)) GTEST_SKIP() << p << " not present";
  auto c = CarbonIntensity::from_csv(p, 0, "DE");
  const double t0 = *parse_local_time("2019-12-20 00:00:00", 0);
  EXPECT_NEAR(c.integrate_g(t0, t0 + 3600, 1000), 217.81772888200652, 1e-9);
  EXPECT_GT(c.series_end_unix_s(), *parse_local_time("2021-01-09 00:00:00", 0));
}

TEST(Carbon, BadCsvNamesFileLineAndExpectation) {
  TempDir d;
  write_file(d / "bad.csv", "Time,Carbon Intensity\n2019-12-20 00:00:00,abc\n");
  try {
    CarbonIntensity::from_csv(d / "bad.csv");
    FAIL() << "no error";
  } catch (const EnergyError& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("bad.csv:2"), std::string::npos) << w;
    EXPECT_NE(w.find("expected"), std::string::npos) << w;
  }
  write_file(d / "hdr.csv", "when,g\n");
  EXPECT_THROW(CarbonIntensity::from_csv(d / "hdr.csv"), EnergyError);
  EXPECT_THROW(CarbonIntensity::from_csv(d / "missing.csv"), EnergyError);
  EXPECT_THROW(CarbonIntensity::constant(-1, "x"), EnergyError);
}

}  // namespace gt::energy
