// tests/energy/carbon_formats_test.cpp: carbon-intensity data as grids and services publish it
// (issue 29, section 1): Electricity Maps' CSV export and API JSON, the UK Carbon Intensity
// API's JSON (forecast and actual, nulls), WattTime MOER in lbs/MWh, ENTSO-E-style MTU CSVs in
// CET/CEST, any CSV with a named column and unit; the country table; messages that quote at
// most a line. The files are small made-up series in each source's documented shape.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "energy/carbon.h"
#include "energy/carbon_regions.h"
#include "test_util.h"

namespace gt::energy {
using namespace test;

namespace {
std::int64_t utc(const char* t) { return parse_time(std::string(t) + "Z", 0)->unix_s; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

// Electricity Maps' CSV export: times in UTC (the header says so), the life-cycle column by
// default (Electricity Maps' own default), the direct one when asked for.
TEST(CarbonFormats, ElectricityMapsCsvExport) {
  TempDir d;
  write_file(d / "DE_2023_hourly.csv",
             "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO\xE2\x82\x82"
             "eq/kWh (direct),Carbon Intensity gCO\xE2\x82\x82"
             "eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,Data "
             "Estimated,Data Estimation Method\n"
             "2023-01-01 00:00:00,Germany,Germany,DE,120.5,160.25,70.1,65.2,entsoe.eu,false,\n"
             "2023-01-01 01:00:00,Germany,Germany,DE,130,170,69.5,64.1,entsoe.eu,false,\n"
             "2023-01-01 02:00:00,Germany,Germany,DE,,,,,entsoe.eu,true,\"TIME_SLICER, AVG\"\n"
             "2023-01-01 03:00:00,Germany,Germany,DE,140,180,68,63,entsoe.eu,false,\n");
  // naive offset 5 h is not used: the file states UTC
  const CarbonCsv c = read_carbon_csv(d / "DE_2023_hourly.csv", 5 * 3600);
  EXPECT_EQ(c.format, "electricitymaps");
  EXPECT_NE(c.value_column.find("(LCA)"), std::string::npos) << c.value_column;
  ASSERT_EQ(c.t_s.size(), 3u);
  EXPECT_EQ(c.t_s[0], utc("2023-01-01 00:00:00"));
  EXPECT_DOUBLE_EQ(c.g_co2e_per_kwh[0], 160.25);
  EXPECT_EQ(c.null_rows, 1u);  // the empty 02:00 row is a gap
  ASSERT_EQ(c.gaps.size(), 1u);
  EXPECT_EQ(c.gaps[0].next_row_s, utc("2023-01-01 03:00:00"));
  EXPECT_NE(c.describe().find("1 null value(s) left out as gaps"), std::string::npos)
      << c.describe();
  CarbonReadOptions direct;
  direct.value_column = "direct";
  EXPECT_DOUBLE_EQ(read_carbon_csv(d / "DE_2023_hourly.csv", 0, direct).g_co2e_per_kwh[1], 130);
}

// The UK Carbon Intensity API: actual by default, nulls (the future's "actual": null) are gaps
// at the end; the forecast when asked for; a forecast-only file is read at its forecast.
TEST(CarbonFormats, UkCarbonIntensityApiJson) {
  TempDir d;
  write_file(d / "uk.json",
             R"({"data":[
  {"from":"2018-01-20T12:00Z","to":"2018-01-20T12:30Z","intensity":{"forecast":266,"actual":263,"index":"moderate"}},
  {"from":"2018-01-20T12:30Z","to":"2018-01-20T13:00Z","intensity":{"forecast":270,"actual":null,"index":"moderate"}},
  {"from":"2018-01-20T13:00Z","to":"2018-01-20T13:30Z","intensity":{"forecast":250,"actual":255,"index":"moderate"}},
  {"from":"2018-01-20T13:30Z","to":"2018-01-20T14:00Z","intensity":{"forecast":240,"actual":null,"index":"low"}}]})");
  CarbonIntensity ci = CarbonIntensity::from_csv(d / "uk.json");
  const CarbonCsv& c = *ci.csv();
  EXPECT_EQ(c.format, "uk-carbon-intensity");
  EXPECT_EQ(c.value_column, "intensity.actual");
  ASSERT_EQ(c.t_s.size(), 2u);
  EXPECT_DOUBLE_EQ(c.g_co2e_per_kwh[0], 263);
  EXPECT_EQ(c.null_rows, 2u);
  // the middle null is a hole: a span over it is flagged
  const double t = static_cast<double>(utc("2018-01-20 12:40:00"));
  auto flags = ci.span_flags(t, t + 60);
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_NE(flags[0].find("no rows from 2018-01-20T12:30:00Z"), std::string::npos) << flags[0];
  EXPECT_NE(ci.describe().find("uk-carbon-intensity intensity.actual"), std::string::npos);
  CarbonReadOptions fc;
  fc.value_kind = "forecast";
  const CarbonCsv f = read_carbon_csv(d / "uk.json", 0, fc);
  ASSERT_EQ(f.t_s.size(), 4u);
  EXPECT_DOUBLE_EQ(f.g_co2e_per_kwh[3], 240);
  // the scheduler prefers the forecast
  CarbonReadOptions pref;
  pref.preferred_value_kind = "forecast";
  EXPECT_EQ(read_carbon_csv(d / "uk.json", 0, pref).value_column, "intensity.forecast");
  // a regional forecast: {"data": [{"regionid", "data": [...]}]}, no actual values
  write_file(d / "region.json",
             R"({"data":[{"regionid":13,"dnoregion":"UKPN London","shortname":"London","data":[
  {"from":"2024-03-01T00:00Z","to":"2024-03-01T00:30Z","intensity":{"forecast":150,"index":"low"},"generationmix":[]},
  {"from":"2024-03-01T00:30Z","to":"2024-03-01T01:00Z","intensity":{"forecast":160,"index":"low"},"generationmix":[]}]}]})");
  const CarbonCsv r = read_carbon_csv(d / "region.json", 0);
  EXPECT_EQ(r.value_column, "intensity.forecast");
  EXPECT_EQ(r.t_s.size(), 2u);
  CarbonReadOptions actual;
  actual.value_kind = "actual";
  EXPECT_NE(
      error_of([&] { read_carbon_csv(d / "region.json", 0, actual); }).find("no actual values"),
      std::string::npos);
}

// WattTime MOER: lbs/MWh converted to gCO2/kWh (x 0.45359237), from JSON (units in meta) and
// from a CSV; marked as a marginal, CO2-only signal.
TEST(CarbonFormats, WattTimeMoerInPoundsPerMegawattHour) {
  TempDir d;
  write_file(d / "moer.json",
             R"({"data":[{"point_time":"2024-05-01T00:00:00+00:00","value":1000.0},
                         {"point_time":"2024-05-01T00:05:00+00:00","value":900.0}],
                 "meta":{"region":"CAISO_NORTH","signal_type":"co2_moer","units":"lbs_co2_per_mwh"}})");
  const CarbonCsv j = read_carbon_csv(d / "moer.json", 0);
  EXPECT_EQ(j.format, "watttime");
  EXPECT_DOUBLE_EQ(j.g_co2e_per_kwh[0], 453.59237);
  EXPECT_EQ(j.step_s, 300);
  EXPECT_NE(j.describe().find("in lbs_co2_per_mwh, marginal"), std::string::npos) << j.describe();
  write_file(d / "moer_v2.json",
             R"([{"point_time":"2019-02-21T00:15:00.000Z","value":844,"ba":"CAISO_NORTH"},
                 {"point_time":"2019-02-21T00:20:00.000Z","value":850,"ba":"CAISO_NORTH"}])");
  EXPECT_DOUBLE_EQ(read_carbon_csv(d / "moer_v2.json", 0).g_co2e_per_kwh[1], 850 * 0.45359237);
  write_file(d / "moer.csv",
             "timestamp,MOER,frequency,market,ba,datatype,version\n"
             "2019-02-21T00:15:00Z,1000,300,RTM,CAISO_NORTH,MOER,3.0\n");
  EXPECT_DOUBLE_EQ(read_carbon_csv(d / "moer.csv", 0).g_co2e_per_kwh[0], 453.59237);
  write_file(d / "index.json",
             R"({"data":[{"point_time":"2024-05-01T00:00:00Z","value":45}],
                 "meta":{"signal_type":"co2_moer_index"}})");
  EXPECT_NE(error_of([&] { read_carbon_csv(d / "index.json", 0); }).find("expected co2_moer"),
            std::string::npos);
}

// ENTSO-E-style CSV: "MTU (CET/CEST)" ranges read in Central European time, across the March
// change (01:00 CET is 00:00 UTC, 03:00 CEST is 01:00 UTC), a value column named by option,
// "n/e" as no value.
TEST(CarbonFormats, EntsoeStyleMtuInCentralEuropeanTime) {
  TempDir d;
  write_file(d / "entsoe.csv",
             "\"MTU (CET/CEST)\",\"Area\",\"Carbon intensity [gCO2eq/kWh]\"\n"
             "\"31.03.2024 00:00 - 31.03.2024 01:00\",\"BZN|DE-LU\",\"300\"\n"
             "\"31.03.2024 01:00 - 31.03.2024 03:00\",\"BZN|DE-LU\",\"310\"\n"
             "\"31.03.2024 03:00 - 31.03.2024 04:00\",\"BZN|DE-LU\",\"n/e\"\n"
             "\"31.03.2024 04:00 - 31.03.2024 05:00\",\"BZN|DE-LU\",\"290\"\n");
  const CarbonCsv c = read_carbon_csv(d / "entsoe.csv", 0);
  EXPECT_EQ(c.format, "entsoe");
  ASSERT_EQ(c.t_s.size(), 3u);
  EXPECT_EQ(c.t_s[0], utc("2024-03-30 23:00:00"));
  EXPECT_EQ(c.t_s[1], utc("2024-03-31 00:00:00"));
  EXPECT_EQ(c.t_s[2], utc("2024-03-31 02:00:00"));  // 04:00 CEST
  EXPECT_EQ(c.null_rows, 1u);
  EXPECT_TRUE(c.explicit_offsets);
  // October: the repeated 02:00 hour is read in order
  EXPECT_EQ(cet_cest_to_utc(utc("2024-10-27 02:30:00"), std::nullopt, "x"),
            utc("2024-10-27 00:30:00"));
  EXPECT_EQ(cet_cest_to_utc(utc("2024-10-27 02:30:00"), utc("2024-10-27 00:30:00"), "x"),
            utc("2024-10-27 01:30:00"));
  EXPECT_NE(error_of([] {
              cet_cest_to_utc(utc("2024-03-31 02:30:00"), std::nullopt, "f:3");
            }).find("f:3: 2024-03-31T02:30:00 does not exist"),
            std::string::npos);
  write_file(d / "entsoe_utc.csv",
             "MTU (UTC),Carbon intensity\n01.01.2023 00:00 - 01.01.2023 01:00,100\n");
  EXPECT_EQ(read_carbon_csv(d / "entsoe_utc.csv", 7200).t_s[0], utc("2023-01-01 00:00:00"));
}

// Any CSV: columns and unit named by option; ';' separators with decimal commas.
TEST(CarbonFormats, AnyCsvWithNamedColumnAndUnit) {
  TempDir d;
  write_file(d / "grid.csv",
             "period_start;region;co2 kg/MWh;load\n2024-01-01 00:00;DE;350,5;1\n"
             "2024-01-01 01:00;DE;340;1\n");
  const CarbonCsv c = read_carbon_csv(d / "grid.csv", 3600);
  EXPECT_EQ(c.format, "csv");
  EXPECT_EQ(c.value_column, "co2 kg/MWh");
  EXPECT_DOUBLE_EQ(c.g_co2e_per_kwh[0], 350.5);
  EXPECT_EQ(c.t_s[0], utc("2023-12-31 23:00:00"));  // naive, read at UTC+1
  CarbonReadOptions o;
  o.value_column = "load";
  o.unit = "lbs/MWh";
  EXPECT_DOUBLE_EQ(read_carbon_csv(d / "grid.csv", 0, o).g_co2e_per_kwh[0], 0.45359237);
  o.unit = "tons";
  EXPECT_NE(error_of([&] { read_carbon_csv(d / "grid.csv", 0, o); }).find("unit 'tons'"),
            std::string::npos);
  write_file(d / "two.csv", "time,co2_a,co2_b\n2024-01-01 00:00,1,2\n");
  EXPECT_NE(error_of([&] { read_carbon_csv(d / "two.csv", 0); }).find("--carbon-column"),
            std::string::npos);
  write_file(d / "fa.csv",
             "from,to,forecast,actual\n2024-01-01T00:00Z,x,100,\n"
             "2024-01-01T00:30Z,x,110,105\n");
  const CarbonCsv fa = read_carbon_csv(d / "fa.csv", 0);
  EXPECT_EQ(fa.value_column, "actual");
  EXPECT_EQ(fa.null_rows, 1u);
}

// What used to print 24 KB: every message about an input quotes at most one line of it.
TEST(CarbonFormats, ErrorsQuoteAtMostALine) {
  TempDir d;
  std::string big = R"({"zone":"x","rows":[)";
  for (int i = 0; i < 2000; ++i) big += R"({"t":"2020-01-01T00:00:00Z","ci":1},)";
  big += "{}]}";
  write_file(d / "big.json", big);
  std::string w = error_of([&] { read_carbon_csv(d / "big.json", 0); });
  EXPECT_LT(w.size(), 700u) << w;
  EXPECT_NE(w.find("no carbon series"), std::string::npos) << w;
  EXPECT_EQ(w.find('\n'), std::string::npos);
  std::string header = "a";
  for (int i = 0; i < 3000; ++i) header += ",col" + std::to_string(i);
  write_file(d / "wide.csv", header + "\n1,2\n");
  w = error_of([&] { read_carbon_csv(d / "wide.csv", 0); });
  EXPECT_LT(w.size(), 700u) << w;
  EXPECT_NE(w.find("..."), std::string::npos) << w;
  write_file(d / "broken.json", "{\"data\": [1, 2,\n" + std::string(5000, ' ') + "oops");
  w = error_of([&] { read_carbon_csv(d / "broken.json", 0); });
  EXPECT_NE(w.find("not valid JSON"), std::string::npos) << w;
  EXPECT_LT(w.size(), 700u) << w;
  // a number past a double's range is nlohmann's out_of_range (406), not a parse_error: it
  // ended the process (CI's fuzz run, 2026-12-02) before the reader caught every JSON error
  write_file(d / "huge.json", R"({"data": 1e3009999})");
  w = error_of([&] { read_carbon_csv(d / "huge.json", 0); });
  EXPECT_NE(w.find("not valid JSON"), std::string::npos) << w;
  EXPECT_NE(w.find("huge.json"), std::string::npos) << w;
  EXPECT_EQ(quote_line("one\ntwo"), "one...");
  EXPECT_EQ(quote_line(std::string(200, 'x'), 10), "xxxxxxxxxx...");
}

// A row with more fields than the header (a decimal comma in a comma-separated file, a shifted
// row) is refused, naming the file and line; empty trailing fields are not (a writer's habit).
TEST(CarbonFormats, ARowWiderThanTheHeaderIsRefused) {
  TempDir d;
  write_file(d / "comma.csv",
             "Time,Carbon Intensity\n2026-12-07 19:00:00,300\n2026-12-07 20:00:00,100,5\n");
  const std::string w = error_of([&] { read_carbon_csv(d / "comma.csv", 0); });
  EXPECT_NE(w.find("comma.csv:3: '2026-12-07 20:00:00,100,5' has 3 fields, the header 2"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("decimal comma"), std::string::npos) << w;
  write_file(d / "trailing.csv",
             "Time,Carbon Intensity\n2026-12-07 19:00:00,300,\n2026-12-07 20:00:00,100,\n");
  const CarbonCsv c = read_carbon_csv(d / "trailing.csv", 0);
  ASSERT_EQ(c.g_co2e_per_kwh.size(), 2u);
  EXPECT_DOUBLE_EQ(c.g_co2e_per_kwh[1], 100);
}

// The country table: CodeCarbon's figures (Our World in Data / Ember, 2021), near matches for
// unknown codes, and the country's name and code on the intensity for emissions.csv.
TEST(CarbonFormats, CountryTable) {
  EXPECT_GE(country_intensities().size(), 200u);
  const CarbonIntensity de = CarbonIntensity::for_country("deu", "--carbon-region");
  EXPECT_EQ(de.constant_g_per_kwh(), 365.477);
  EXPECT_EQ(de.origin(), CarbonOrigin::kCountry);
  EXPECT_EQ(de.country_iso_code(), "DEU");
  EXPECT_EQ(de.country_name(), "Germany");
  EXPECT_NE(de.describe().find("DEU (Germany) annual average"), std::string::npos);
  EXPECT_NE(de.describe().find("2021"), std::string::npos);
  EXPECT_EQ(find_country("FRA")->g_co2e_per_kwh, 67.39);
  EXPECT_EQ(find_country("USA")->g_co2e_per_kwh, 379.26);
  EXPECT_FALSE(find_country("XYZ"));
  std::string w = error_of([] { CarbonIntensity::for_country("DEX", "--carbon-region"); });
  EXPECT_NE(w.find("--carbon-region: unknown country code 'DEX'"), std::string::npos) << w;
  EXPECT_NE(w.find("DEU (Germany)"), std::string::npos) << w;
  w = error_of([] { country_or_throw("Germany", "energy.carbon_region"); });
  EXPECT_NE(w.find("DEU (Germany)"), std::string::npos) << w;
  w = error_of([] { country_or_throw("GB", "x"); });
  EXPECT_NE(w.find("GBR (United Kingdom)"), std::string::npos) << w;
  const CarbonIntensity c = CarbonIntensity::constant(100, "").with_country("FRA", "x");
  EXPECT_EQ(c.country_name(), "France");
  EXPECT_EQ(c.constant_g_per_kwh(), 100);
}

// The options of a series read without one are refused by one function, the series' UTC offset
// among them, each named as its caller names it: the command line, Python, a configuration, or
// the caller's own name (a policy file's key with its line). 0 is UTC, the default: accepted.
TEST(CarbonFormats, ReadOptionsAndUtcOffsetWithoutASeriesAreRefusedByTheirNames) {
  CarbonReadOptions o;
  EXPECT_EQ(error_of([&] { o.refuse_without_series("--carbon-csv FILE", 0); }), "no error");
  EXPECT_EQ(error_of([&] { o.refuse_without_series("--carbon-csv FILE", 2.5); }),
            "--carbon-utc-offset 2.5: the time zone of a series' times; expected --carbon-csv "
            "FILE with it");
  o.unit = "lbs/MWh";  // the options of the reading come first
  EXPECT_NE(error_of([&] {
              o.refuse_without_series("--carbon-csv FILE", 2);
            }).find("--carbon-unit lbs/MWh: says how a series file is read"),
            std::string::npos);
  o.unit.clear();
  o.option_prefix = "carbon_";
  EXPECT_EQ(error_of([&] { o.refuse_without_series("carbon=PATH", -3); }),
            "carbon_utc_offset_h = -3: the time zone of a series' times; expected carbon=PATH "
            "with it");
  o.option_prefix = "energy.carbon_";
  EXPECT_EQ(error_of([&] { o.refuse_without_series("energy.carbon_csv", 1); }),
            "energy.carbon_utc_offset_h = 1: the time zone of a series' times; expected "
            "energy.carbon_csv with it");
  EXPECT_EQ(error_of([&] {
              o.refuse_without_series("daemon.carbon_csv", 1, "p.toml:3: key 'daemon.x'");
            }),
            "p.toml:3: key 'daemon.x' = 1: the time zone of a series' times; expected "
            "daemon.carbon_csv with it");
}

}  // namespace gt::energy
