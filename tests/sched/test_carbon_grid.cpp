// Carbon series: time parsing, CSV loading with a stated UTC offset, resampling, emissions.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "sched/carbon_grid.h"
#include "test_util.h"

using namespace gt::sched;
using gt::sched::test::TempDir;

TEST(SchedCarbon, ParsesWallTimeAtOffset) {
  // 2020-01-01T00:00:00Z is 1577836800.
  EXPECT_EQ(parse_wall_time("2020-01-01 00:00:00", 0, "t"), 1577836800);
  EXPECT_EQ(parse_wall_time("2020-01-01T01:00", 3600, "t"), 1577836800);
  EXPECT_EQ(format_iso_time(1577836800, 3600), "2020-01-01T01:00:00+01:00");
  EXPECT_EQ(format_wall_time(1577836800, -5 * 3600), "2019-12-31T19:00:00");
  EXPECT_THROW(parse_wall_time("2020-13-01 00:00:00", 0, "t"), gt::Error);
  EXPECT_THROW(parse_wall_time("yesterday", 0, "t"), gt::Error);
}

TEST(SchedCarbon, ParsesUtcOffset) {
  EXPECT_EQ(parse_utc_offset_s("0"), 0);
  EXPECT_EQ(parse_utc_offset_s("2"), 7200);
  EXPECT_EQ(parse_utc_offset_s("-5"), -18000);
  EXPECT_EQ(parse_utc_offset_s("5.5"), 19800);
  EXPECT_EQ(parse_utc_offset_s("+01:00"), 3600);
  EXPECT_EQ(parse_utc_offset_s("-03:30"), -12600);
  EXPECT_THROW(parse_utc_offset_s("CET"), gt::Error);
  EXPECT_THROW(parse_utc_offset_s("20"), gt::Error);
}

TEST(SchedCarbon, LoadsCsvWithStatedOffsetAndResamplesIrregularSteps) {
  TempDir d;
  // 30-min steps, then one 15-min stretch: the grid is 15 min, each value held until the next.
  auto p = d.write("ci.csv",
                   "Time,Carbon Intensity\n"
                   "2020-01-01 01:00:00,100\n"
                   "2020-01-01 01:30:00,200\n"
                   "2020-01-01 01:45:00,300\n"
                   "2020-01-01 02:00:00,400\n");
  CarbonSeries s = load_carbon_csv(p, 3600);
  EXPECT_EQ(s.start_s, 1577836800);  // 01:00 at UTC+1 is midnight UTC
  EXPECT_EQ(s.slot_s, 900);
  // The last sample holds for the median step (15 min).
  ASSERT_EQ(s.g_co2e_per_kwh.size(), 5u);
  EXPECT_DOUBLE_EQ(s.g_co2e_per_kwh[0], 100);
  EXPECT_DOUBLE_EQ(s.g_co2e_per_kwh[1], 100);
  EXPECT_DOUBLE_EQ(s.g_co2e_per_kwh[2], 200);
  EXPECT_DOUBLE_EQ(s.g_co2e_per_kwh[3], 300);
  EXPECT_DOUBLE_EQ(s.g_co2e_per_kwh[4], 400);
  // 1 kW for 30 min at 100 g/kWh = 50 g; then 15 min at 200 = 50 g.
  EXPECT_NEAR(s.g_co2e(s.start_s, s.start_s + 2700, 1000), 100.0, 1e-9);
  EXPECT_THROW(s.g_co2e(s.start_s - 1, s.start_s + 10, 1000), gt::Error);
}

TEST(SchedCarbon, MissingColumnIsAnErrorNamingFileAndColumn) {
  TempDir d;
  auto p = d.write("bad.csv", "Time,CI\n2020-01-01 00:00:00,1\n2020-01-01 00:15:00,2\n");
  try {
    load_carbon_csv(p, 0);
    FAIL() << "expected gt::Error";
  } catch (const gt::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("bad.csv"), std::string::npos) << m;
    EXPECT_NE(m.find("Carbon Intensity"), std::string::npos) << m;
  }
}

TEST(SchedCarbon, BadValueAndUnorderedTimesAreErrorsNamingTheLine) {
  TempDir d;
  auto p =
      d.write("v.csv", "Time,Carbon Intensity\n2020-01-01 00:00:00,1\n2020-01-01 00:15:00,x\n");
  try {
    load_carbon_csv(p, 0);
    FAIL();
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("v.csv:3"), std::string::npos) << e.what();
  }
  auto q =
      d.write("o.csv", "Time,Carbon Intensity\n2020-01-01 00:15:00,1\n2020-01-01 00:00:00,2\n");
  EXPECT_THROW(load_carbon_csv(q, 0), gt::Error);
  EXPECT_THROW(load_carbon_csv((d.path / "absent.csv").string(), 0), gt::Error);
}

TEST(SchedCarbon, ForecastErrorIsSeededAndScaledToTheMean) {
  CarbonSeries s;
  s.start_s = 0;
  s.slot_s = 900;
  s.g_co2e_per_kwh.assign(20000, 300.0);
  CarbonSeries a = with_forecast_error(s, 10, 7), b = with_forecast_error(s, 10, 7);
  CarbonSeries c = with_forecast_error(s, 10, 8);
  EXPECT_EQ(a.g_co2e_per_kwh, b.g_co2e_per_kwh);
  EXPECT_NE(a.g_co2e_per_kwh, c.g_co2e_per_kwh);
  double var = 0;
  for (double v : a.g_co2e_per_kwh) var += (v - 300) * (v - 300);
  EXPECT_NEAR(std::sqrt(var / 20000), 30.0, 1.0);  // 10 % of the mean
  EXPECT_EQ(with_forecast_error(s, 0, 1).g_co2e_per_kwh, s.g_co2e_per_kwh);
}

// Issue 12.6: the scheduler reads series with the energy module's reader, so the rules are the
// meter's: rows with their own offset are honoured (they were refused), a byte order mark and
// CRLF are accepted, and holes are reported, not bridged silently.
TEST(SchedCarbon, RowsWithTheirOwnOffsetAreConvertedToUtc) {
  TempDir d;
  auto p = d.write("off.csv",
                   "\xEF\xBB\xBFTime,Carbon Intensity\r\n"
                   "2020-06-08T00:00:00+02:00,100\r\n"
                   "2020-06-08T01:00:00+02:00,500\r\n"
                   "2020-06-08T02:00:00+02:00,900\r\n");
  CarbonSeries s = load_carbon_csv(p, 0);  // --utc-offset 0 does not override the rows' own
  EXPECT_EQ(s.start_s, parse_wall_time("2020-06-07 22:00:00", 0, "t"));
  ASSERT_EQ(s.g_co2e_per_kwh.size(), 3u);
  EXPECT_DOUBLE_EQ(s.g_co2e_per_kwh[2], 900);  // 00:00-01:00 UTC
  EXPECT_TRUE(s.gaps.empty());
  EXPECT_EQ(parse_wall_time("2020-06-08T00:30:00Z", 3600, "t"),
            parse_wall_time("2020-06-08 00:30", 0, "t"));
  EXPECT_THROW(parse_wall_time("2021-02-29 00:00", 0, "t"), gt::Error);
}

TEST(SchedCarbon, HolesAreKeptAndWarnedAbout) {
  TempDir d;
  auto p = d.write("hole.csv",
                   "Time,Carbon Intensity\n"
                   "2020-01-01 00:00:00,100\n2020-01-01 01:00:00,200\n"
                   "2020-01-01 05:00:00,300\n2020-01-01 06:00:00,400\n");
  CarbonSeries s = load_carbon_csv(p, 0);
  EXPECT_EQ(s.row_step_s, 3600);
  ASSERT_EQ(s.gaps.size(), 1u);
  auto w = gap_warnings(s);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("hole.csv"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("no rows from 2020-01-01T02:00:00Z to 2020-01-01T05:00:00Z"),
            std::string::npos)
      << w[0];
  // the hole still holds the value before it on the grid (as the meter does)
  EXPECT_DOUBLE_EQ(s.g_co2e_per_kwh[3], 200);
}

// Issue 17.2: a longer slot than the rows' step, holding either the time-weighted mean or the
// value at the slot's start (how the Let's Wait Awhile simulator reads 15-min rows at 30 min).
TEST(SchedCarbon, SlotGridMeanOrValueAtStart) {
  TempDir d;
  auto p = d.write("ci.csv",
                   "Time,Carbon Intensity\n"
                   "2020-01-01 00:00:00,100\n"
                   "2020-01-01 00:15:00,200\n"
                   "2020-01-01 00:30:00,300\n"
                   "2020-01-01 00:45:00,400\n");
  CarbonSeries fine = load_carbon_csv(p, 0);
  EXPECT_EQ(fine.slot_s, 900);
  CarbonSeries mean = load_carbon_csv(p, 0, SlotGrid{1800, false});
  EXPECT_EQ(mean.slot_s, 1800);
  EXPECT_EQ(mean.g_co2e_per_kwh, (std::vector<double>{150, 350}));
  CarbonSeries start = load_carbon_csv(p, 0, SlotGrid{1800, true});
  EXPECT_EQ(start.g_co2e_per_kwh, (std::vector<double>{100, 300}));
  EXPECT_TRUE(parse_slot_value("start"));
  EXPECT_FALSE(parse_slot_value("mean"));
  EXPECT_THROW(parse_slot_value("first"), gt::Error);
  EXPECT_THROW(load_carbon_csv(p, 0, SlotGrid{-5, false}), gt::Error);
}

// Found by fuzz/fuzz_carbon_csv: rows centuries apart (a mistyped year) made a grid of tens of
// millions of slots, allocated and filled before anything was said (a hang, then out of memory
// for a wider span). The grid is bounded; the error names the file, the span and the slot.
TEST(SchedCarbon, GridTooLargeIsAnErrorNotAnAllocation) {
  TempDir d;
  auto p = d.write("ci.csv",
                   "Time,Carbon Intensity\n"
                   "1010-06-08T00:00:00+02:00,120\n"
                   "2020-06-08T01:00:00+02:00,130\n"
                   "2020-06-08T04:00:00+02:00,110\n");
  for (SlotGrid grid : {SlotGrid{0, false}, SlotGrid{900, true}}) {
    try {
      load_carbon_csv(p, 0, grid);
      FAIL() << "expected an error for a grid of millions of slots";
    } catch (const gt::Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find(p), std::string::npos) << m;
      EXPECT_NE(m.find("1010-06-07T22:00:00Z"), std::string::npos) << m;
      EXPECT_NE(m.find("slots"), std::string::npos) << m;
    }
  }
  // the same series on a coarse grid is fine: about 2020 years (the last row holds for the
  // median step, here the upper of the two spacings: 1010 years) of 365-day slots
  CarbonSeries s = load_carbon_csv(p, 0, SlotGrid{365 * 86400, true});
  EXPECT_GT(s.g_co2e_per_kwh.size(), 2000u);
  EXPECT_LT(s.g_co2e_per_kwh.size(), 2030u);
}
