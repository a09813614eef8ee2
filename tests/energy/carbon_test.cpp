// tests/energy/carbon_test.cpp: constant and series intensity, integrated against power.
#include "energy/carbon.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <tuple>

#include "core/error.h"
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
  } catch (const Error& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("bad.csv:2"), std::string::npos) << w;
    EXPECT_NE(w.find("expected"), std::string::npos) << w;
  }
  write_file(d / "hdr.csv", "when,g\n");
  EXPECT_THROW(CarbonIntensity::from_csv(d / "hdr.csv"), Error);
  EXPECT_THROW(CarbonIntensity::from_csv(d / "missing.csv"), Error);
  EXPECT_THROW(CarbonIntensity::constant(-1, "x"), Error);
}

// Issue 12.6: one reader with one set of rules for every command.

// A UTF-8 byte order mark and CRLF line ends (as spreadsheet programs write them) are read like
// a plain file; an invisible character in a bad header is shown in the message.
TEST(Carbon, ByteOrderMarkAndCrlfAreAccepted) {
  TempDir d;
  write_file(d / "bom.csv",
             "\xEF\xBB\xBFTime,Carbon Intensity\r\n2020-01-01 00:00:00,100\r\n"
             "2020-01-01 01:00:00,200\r\n");
  auto c = CarbonIntensity::from_csv(d / "bom.csv");
  const double t0 = *parse_local_time("2020-01-01 00:00:00", 0);
  EXPECT_DOUBLE_EQ(c.at(t0 + 1800), 100);
  EXPECT_DOUBLE_EQ(c.at(t0 + 5400), 200);
  EXPECT_DOUBLE_EQ(c.integrate_g(t0, t0 + 7200, 1000), 300);  // 1 kWh at 100, 1 kWh at 200
  write_file(d / "nbsp.csv",
             "Time,\xC2\xA0"
             "Carbon Intensity\n2020-01-01 00:00:00,1\n");
  // a no-break space before the name no longer hides the column
  EXPECT_DOUBLE_EQ(CarbonIntensity::from_csv(d / "nbsp.csv").at(t0), 1);
  write_file(d / "nbsp2.csv",
             "Time,\xC2\xA0"
             "CI\n2020-01-01 00:00:00,1\n");
  try {
    CarbonIntensity::from_csv(d / "nbsp2.csv");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\\u00a0CI"), std::string::npos) << e.what();
  }
}

// Rows with their own offset are converted to UTC: 2020-06-08T02:00:00+02:00 is 00:00 UTC, so
// 00:30 UTC reads that row's 900 (dropping the offset gave the 100 of 00:00+02:00).
TEST(Carbon, ExplicitOffsetsAreHonoured) {
  TempDir d;
  write_file(d / "off.csv",
             "Time,Carbon Intensity\n"
             "2020-06-08T00:00:00+02:00,100\n"
             "2020-06-08T01:00:00+02:00,500\n"
             "2020-06-08T02:00:00+02:00,900\n"
             "2020-06-08T03:00:00+02:00,300\n");
  // the naive offset (here 5 h) does not apply to rows that state theirs
  auto c = CarbonIntensity::from_csv(d / "off.csv", 5.0);
  const double utc_0030 = *parse_local_time("2020-06-08 00:30:00", 0);
  EXPECT_DOUBLE_EQ(c.at(utc_0030), 900);
  EXPECT_NE(c.describe().find("own UTC offsets"), std::string::npos) << c.describe();
  write_file(d / "z.csv",
             "Time,Carbon Intensity\n2020-06-08T00:00:00Z,100\n2020-06-08T01:00:00Z,900\n");
  auto z = CarbonIntensity::from_csv(d / "z.csv", 2.0);
  EXPECT_DOUBLE_EQ(z.at(*parse_local_time("2020-06-08 00:30:00", 0)), 100);
  EXPECT_DOUBLE_EQ(z.at(*parse_local_time("2020-06-08 01:30:00", 0)), 900);
  // the same through the time parser every command uses
  EXPECT_EQ(parse_time("2020-06-08T00:30:00+02:00", 0)->unix_s,
            parse_time("2020-06-07 22:30:00", 0)->unix_s);
  EXPECT_EQ(parse_time("2020-06-08 00:30-0530", 0)->unix_s,
            parse_time("2020-06-08 06:00", 0)->unix_s);
  EXPECT_TRUE(parse_time("2020-06-08T00:30:00Z", 3600)->explicit_offset);
  EXPECT_FALSE(parse_time("2020-06-08T00:30:00", 3600)->explicit_offset);
}

// A file mixing rows with and without an offset has no one reading: refused, naming the line.
TEST(Carbon, MixedNaiveAndOffsetRowsAreRefused) {
  TempDir d;
  write_file(d / "mix.csv",
             "Time,Carbon Intensity\n2020-06-08 00:00:00,1\n2020-06-08T01:00:00+02:00,2\n");
  try {
    CarbonIntensity::from_csv(d / "mix.csv");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mix.csv:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("offset"), std::string::npos) << e.what();
  }
}

// Calendar arithmetic is std::chrono's: dates off the calendar are refused, leap days are not.
TEST(Carbon, TimesAreCheckedOnTheCalendar) {
  std::string why;
  EXPECT_FALSE(parse_time("2021-02-29 00:00:00", 0, &why));
  EXPECT_NE(why.find("not a calendar date"), std::string::npos) << why;
  EXPECT_EQ(parse_time("2020-02-29 00:00:00", 0)->unix_s, 1582934400);
  EXPECT_FALSE(parse_time("2020-06-08 24:00:00", 0));
  EXPECT_FALSE(parse_time("2020-06-08 00:00:00+15:00", 0));
  EXPECT_FALSE(parse_time("2020-06-08 00:00:00 CET", 0));
  EXPECT_EQ(format_iso_time(1582934400, -5 * 3600), "2020-02-28T19:00:00-05:00");
  EXPECT_EQ(format_wall_time(-1, 0), "1969-12-31T23:59:59");
  EXPECT_EQ(civil_to_unix_s(2020, 1, 1, 1, 0, 0, 3600), 1577836800);
  EXPECT_THROW(civil_to_unix_s(2020, 2, 30, 0, 0, 0, 0), Error);
  EXPECT_EQ(format_span_s(4 * 3600), "4 h");
  EXPECT_EQ(format_span_s(900), "15 min");
}

// A 4-hour hole in an hourly series is found, and a measured span over it is flagged (the value
// before the hole is still what is integrated: the flag says so).
TEST(Carbon, HoleLongerThanTheStepIsFlagged) {
  TempDir d;
  write_file(d / "hole.csv",
             "Time,Carbon Intensity\n"
             "2020-01-01 00:00:00,100\n2020-01-01 01:00:00,200\n2020-01-01 02:00:00,300\n"
             "2020-01-01 06:00:00,400\n2020-01-01 07:00:00,500\n");
  auto c = CarbonIntensity::from_csv(d / "hole.csv");
  ASSERT_TRUE(c.csv());
  EXPECT_EQ(c.csv()->step_s, 3600);
  ASSERT_EQ(c.csv()->gaps.size(), 1u);
  EXPECT_EQ(c.csv()->gaps[0].last_row_s, *parse_local_time("2020-01-01 02:00:00", 0));
  EXPECT_EQ(c.csv()->gaps[0].next_row_s, *parse_local_time("2020-01-01 06:00:00", 0));
  const double t0 = *parse_local_time("2020-01-01 00:00:00", 0);
  EXPECT_TRUE(c.span_flags(t0, t0 + 2 * 3600).empty());             // before the hole
  EXPECT_TRUE(c.span_flags(t0 + 6 * 3600, t0 + 7 * 3600).empty());  // after it
  auto f = c.span_flags(t0 + 3.5 * 3600, t0 + 4 * 3600);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].find("no rows from 2020-01-01T03:00:00Z to 2020-01-01T06:00:00Z"),
            std::string::npos)
      << f[0];
  EXPECT_NE(f[0].find("4 h between rows"), std::string::npos) << f[0];
  EXPECT_NE(f[0].find("step is 1 h"), std::string::npos) << f[0];

  // the meter puts it in the window's flags
  write_file(d / "p.csv", "time_s,power_w\n0,1000\n20000,1000\n");
  SensorList s;
  s.push_back(std::make_unique<ReplaySensor>(d / "p.csv", "replay", "gpu"));
  ManualClock clk;
  MeterOptions o = manual_options(d.path);
  o.carbon = c;
  o.carbon_replay_start_unix_s = t0 + 2.5 * 3600;
  Meter m(std::move(s), o, clk.clock());
  m.begin_window("w");
  for (int i = 0; i < 36; ++i) {
    clk.advance(100);
    m.sample_now();
  }
  auto r = m.end_window("w");
  EXPECT_NEAR(r.g_co2e, 300, 1e-6);  // 1 kWh at the held 300
  bool flagged = false;
  for (auto& x : r.flags) flagged = flagged || x.find("no rows from") != std::string::npos;
  EXPECT_TRUE(flagged) << ::testing::PrintToString(r.flags);
}

// The real German series has two 30-minute steps in its 15-minute grid: both are holes.
TEST(Carbon, SharedGermanSeriesHolesAreFound) {
  const std::string p = std::string(GT_CARBON_DATA) + "/lets_wait_awhile_2020/ger_ci.csv";
  if (!std::filesystem::exists(p)) GTEST_SKIP() << p << " not present";
  auto csv = read_carbon_csv(p, 0);
  EXPECT_EQ(csv.step_s, 900);
  EXPECT_EQ(csv.gaps.size(), 2u);
}

// 0 gCO2e/kWh is a value (a zero-carbon supply), not "unset"; the default says it is one; every
// measurement names the intensity and its origin.
TEST(Carbon, ZeroIsAValueAndTheOriginIsNamed) {
  auto zero = CarbonIntensity::constant(0, "", "energy.carbon_intensity");
  EXPECT_EQ(zero.origin(), CarbonOrigin::kConstant);
  EXPECT_DOUBLE_EQ(zero.integrate_g(0, 3600, 1000), 0);
  EXPECT_EQ(zero.describe(), "0 gCO2e/kWh, constant from energy.carbon_intensity");
  CarbonIntensity def;
  EXPECT_EQ(def.origin(), CarbonOrigin::kDefault);
  EXPECT_NE(def.describe().find("475 gCO2e/kWh, default"), std::string::npos) << def.describe();
  EXPECT_THROW(CarbonIntensity::constant(std::nan(""), "x"), Error);

  TempDir d;
  write_file(d / "p.csv", "time_s,power_w\n0,1000\n7200,1000\n");
  for (auto [ci, g, origin] : {std::tuple{zero, 0.0, "constant"}, {def, 475.0, "default"}}) {
    SensorList s;
    s.push_back(std::make_unique<ReplaySensor>(d / "p.csv", "replay", "gpu"));
    ManualClock clk;
    MeterOptions o = manual_options(d.path);
    o.carbon = ci;
    Meter m(std::move(s), o, clk.clock());
    m.begin_window("hour");
    for (int i = 0; i < 36; ++i) {
      clk.advance(100);
      m.sample_now();
    }
    auto r = m.end_window("hour");
    EXPECT_NEAR(r.g_co2e, g, 1e-6);
    ASSERT_TRUE(r.carbon_g_per_kwh);
    EXPECT_DOUBLE_EQ(*r.carbon_g_per_kwh, g);
    EXPECT_EQ(r.carbon_origin, origin);
  }
}

}  // namespace gt::energy
