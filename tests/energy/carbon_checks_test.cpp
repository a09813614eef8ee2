// tests/energy/carbon_checks_test.cpp: what the carbon module tells the user about its data.
// Values outside the plausible range of a grid's intensity (a kg/kWh file read as g/kWh) give
// one warning per file naming the value and the likely unit mistake; a measured span the series
// does not cover gives a flag naming the series' last row and the span, in the measurement's
// flags and its JSON (what `measure --json`, summary.json and the report carry).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "energy/carbon.h"
#include "energy/measurement_output.h"
#include "energy/replay.h"
#include "test_util.h"

namespace gt::energy {
using namespace test;

namespace {

const std::string kGer = std::string(GT_CARBON_DATA) + "/lets_wait_awhile_2020/ger_ci.csv";

// The real German series with every value multiplied by `factor` (0.001: as kg/kWh).
std::string scaled_copy(const std::string& to, double factor) {
  std::ifstream in(kGer);
  std::ostringstream out;
  out.precision(17);  // the values as exact as the file's
  std::string line;
  std::getline(in, line);
  out << line << "\n";
  while (std::getline(in, line)) {
    const auto comma = line.find(',');
    out << line.substr(0, comma) << "," << std::stod(line.substr(comma + 1)) * factor << "\n";
  }
  write_file(to, out.str());
  return to;
}

}  // namespace

// Every real series in shared/data/carbon (DE, GB, FR, California; 17 to 600 gCO2e/kWh) is
// plausible: no warning.
TEST(CarbonChecks, RealSeriesGiveNoWarning) {
  const std::filesystem::path dir(GT_CARBON_DATA);
  if (!std::filesystem::exists(kGer)) GTEST_SKIP() << kGer << " not present";
  int files = 0;
  for (const auto& sub : {"lets_wait_awhile_2020", "lets_wait_awhile_2025_fork"})
    for (const auto& e : std::filesystem::directory_iterator(dir / sub)) {
      if (e.path().filename().string().find("_ci.csv") == std::string::npos) continue;
      const CarbonIntensity c = CarbonIntensity::from_csv(e.path().string());
      EXPECT_TRUE(c.warnings().empty()) << e.path() << ": " << c.warnings()[0];
      ++files;
    }
  EXPECT_GE(files, 3);
}

// The German series in kg/kWh (0.218 for 218 g): one warning for the whole file, naming it, how
// many values, the first with its row, the likely unit and the option that reads it; with
// --carbon-unit kg/kWh the values are the real ones again and nothing is said.
TEST(CarbonChecks, KgPerKwhSeriesIsWarnedOnceWithTheUnitToSet) {
  if (!std::filesystem::exists(kGer)) GTEST_SKIP() << kGer << " not present";
  TempDir d;
  const std::string kg = scaled_copy(d / "ger_kg.csv", 0.001);
  const CarbonIntensity c = CarbonIntensity::from_csv(kg);
  ASSERT_EQ(c.warnings().size(), 1u);
  const std::string w = c.warnings()[0];
  EXPECT_NE(w.find("carbon series " + kg + ": "), std::string::npos) << w;
  EXPECT_NE(w.find("37147 of 37147 values lie outside 1..2000 gCO2e/kWh"), std::string::npos) << w;
  EXPECT_NE(w.find("the first: 0.21829 gCO2e/kWh at " + kg + ":2"), std::string::npos) << w;
  EXPECT_NE(w.find("kg/kWh (= t/MWh) taken for g/kWh, 1000x too low"), std::string::npos) << w;
  EXPECT_NE(w.find("set --carbon-unit kg/kWh"), std::string::npos) << w;
  EXPECT_EQ(c.describe().find("outside"), std::string::npos);  // a warning, not the description

  CarbonReadOptions unit;
  unit.unit = "kg/kWh";
  const CarbonIntensity fixed = CarbonIntensity::from_csv(kg, 0, "", unit);
  EXPECT_TRUE(fixed.warnings().empty()) << fixed.warnings()[0];
  const CarbonIntensity real = CarbonIntensity::from_csv(kGer);
  const double t0 = *parse_local_time("2020-06-01 12:00:00", 0);
  EXPECT_NEAR(fixed.at(t0), real.at(t0), 1e-9 * real.at(t0));

  // a configuration names its key the way a configuration sets it
  CarbonReadOptions cfg;
  cfg.option_prefix = "energy.carbon_";
  const std::string wc = read_carbon_csv(kg, 0, cfg).implausible_warning;
  EXPECT_NE(wc.find("set energy.carbon_unit = 'kg/kWh'"), std::string::npos) << wc;
}

// Values 1000x too high (g/MWh) and zeros standing for missing values are said too.
TEST(CarbonChecks, GramsPerMwhAndZeroRowsAreWarned) {
  TempDir d;
  write_file(d / "g_mwh.csv",
             "Time,Carbon Intensity\n2020-01-01 00:00:00,250000\n2020-01-01 01:00:00,260000\n");
  const std::string high = CarbonIntensity::from_csv(d / "g_mwh.csv").warnings().at(0);
  EXPECT_NE(high.find("2 of 2 values"), std::string::npos) << high;
  EXPECT_NE(high.find("250000 gCO2e/kWh at " + d / "g_mwh.csv" + ":2"), std::string::npos) << high;
  EXPECT_NE(high.find("g/MWh taken for g/kWh (1000x too high)"), std::string::npos) << high;

  write_file(d / "zero.csv",
             "Time,Carbon Intensity\n2020-01-01 00:00:00,300\n2020-01-01 01:00:00,0\n"
             "2020-01-01 02:00:00,310\n");
  const std::string zero = CarbonIntensity::from_csv(d / "zero.csv").warnings().at(0);
  EXPECT_NE(zero.find("1 of 3 values"), std::string::npos) << zero;
  EXPECT_NE(zero.find(d / "zero.csv" + ":3"), std::string::npos) << zero;
  EXPECT_NE(zero.find("a zero standing for a missing value"), std::string::npos) << zero;
}

// A constant outside the range is said with the option that set it; 0 (a zero-carbon supply, a
// choice) and plausible values, countries' figures and the default are not.
TEST(CarbonChecks, ConstantOutsideTheRangeIsWarnedNamingItsOption) {
  const auto w = CarbonIntensity::constant(0.4, "", "--carbon-intensity").warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("--carbon-intensity: carbon intensity 0.4 gCO2e/kWh lies outside 1..2000"),
            std::string::npos)
      << w[0];
  EXPECT_NE(w[0].find("kg/kWh"), std::string::npos) << w[0];
  EXPECT_EQ(CarbonIntensity::constant(5000, "", "energy.carbon_intensity").warnings().size(), 1u);
  EXPECT_TRUE(CarbonIntensity::constant(0, "", "--carbon-intensity").warnings().empty());
  EXPECT_TRUE(CarbonIntensity::constant(400, "", "--carbon-intensity").warnings().empty());
  EXPECT_TRUE(CarbonIntensity::for_country("DEU", "--carbon-region").warnings().empty());
  EXPECT_TRUE(CarbonIntensity().warnings().empty());
}

// A span past the end of the real German series (last row 2021-01-09 23:00, step 15 min): the
// flag names the span, the file, its last row, where it stops covering and the value held.
TEST(CarbonChecks, SpanPastTheSeriesNamesItsLastRowAndTheSpan) {
  if (!std::filesystem::exists(kGer)) GTEST_SKIP() << kGer << " not present";
  const CarbonIntensity c = CarbonIntensity::from_csv(kGer);
  const double t0 = *parse_local_time("2021-01-09 23:00:00", 0);
  EXPECT_TRUE(c.span_flags(t0, t0 + 900).empty());  // the last row's own step
  const auto f = c.span_flags(t0 + 600, t0 + 3600);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].rfind(kCarbonOutsideFlag, 0), 0u) << f[0];
  EXPECT_NE(f[0].find("the measured interval 2021-01-09T23:10:00Z .. 2021-01-10T00:00:00Z lies "
                      "partly outside the intensity series " +
                      kGer),
            std::string::npos)
      << f[0];
  EXPECT_NE(f[0].find("to its last row at 2021-01-09T23:00:00Z (step 15 min: it covers up to "
                      "2021-01-09T23:15:00Z)"),
            std::string::npos)
      << f[0];
  EXPECT_NE(f[0].find("after 2021-01-09T23:15:00Z its last value, 508.091 gCO2e/kWh, was used "
                      "(45 min)"),
            std::string::npos)
      << f[0];
  // wholly before the series: its first value, and not "partly"
  const double first = *parse_local_time("2019-12-20 00:00:00", 0);
  const auto b = c.span_flags(first - 7200, first - 3600);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_NE(b[0].find("lies outside the intensity series"), std::string::npos) << b[0];
  EXPECT_NE(b[0].find("before 2019-12-20T00:00:00Z its first value, 218.29 gCO2e/kWh, was used "
                      "(1 h)"),
            std::string::npos)
      << b[0];
}

// The meter puts that flag in the measurement, and its JSON (measure --json, summary.json's
// "energy") carries it.
TEST(CarbonChecks, MeasurementPastTheSeriesCarriesTheFlagIntoItsJson) {
  TempDir d;
  write_file(d / "ci.csv",
             "Time,Carbon Intensity\n2020-01-01 00:00:00,100\n2020-01-01 01:00:00,200\n");
  write_file(d / "p.csv", "time_s,power_w\n0,1000\n20000,1000\n");
  SensorList s;
  s.push_back(std::make_unique<ReplaySensor>(d / "p.csv", "replay", "gpu"));
  ManualClock clk;
  MeterOptions o = manual_options(d.path);
  o.carbon = CarbonIntensity::from_csv(d / "ci.csv");
  o.carbon_replay_start_unix_s = *parse_local_time("2020-01-01 01:30:00", 0);
  Meter m(std::move(s), o, clk.clock());
  m.begin_window("w");
  for (int i = 0; i < 36; ++i) {
    clk.advance(100);
    m.sample_now();
  }
  const Measurement r = m.end_window("w");
  EXPECT_NEAR(r.g_co2e, 200, 1e-6);  // 1 kWh at the last value, held
  const nlohmann::json j = to_json(r);
  std::string flag;
  for (const auto& f : j["flags"])
    if (f.get<std::string>().rfind(kCarbonOutsideFlag, 0) == 0) flag = f.get<std::string>();
  EXPECT_NE(flag.find("2020-01-01T01:30:00Z .. 2020-01-01T02:30:00Z"), std::string::npos)
      << j["flags"].dump();
  EXPECT_NE(flag.find("last row at 2020-01-01T01:00:00Z"), std::string::npos) << flag;
  EXPECT_NE(flag.find("its last value, 200 gCO2e/kWh, was used (30 min)"), std::string::npos)
      << flag;
}

}  // namespace gt::energy
