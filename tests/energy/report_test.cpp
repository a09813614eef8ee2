// tests/energy/report_test.cpp: CodeCarbon CSV, JSON, summaries, metrics.
#include "energy/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "energy/metrics.h"
#include "test_util.h"

namespace gt::energy {
using namespace test;

namespace {
Measurement sample_measurement() {
  Measurement m;
  m.name = "run";
  m.start_unix_s = 1.7e9;
  m.duration_s = 10;
  m.energy_j = 3.6e6;
  m.avg_power_w = 3.6e5;
  m.g_co2e = 475;
  m.estimated = true;
  m.method = "cpu-estimate: estimated: TDP 85 W x utilization";
  DomainMeasurement c;
  c.sensor = "cpu-estimate";
  c.domain = "cpu";
  c.energy_j = 2.7e6;
  DomainMeasurement r;
  r.sensor = "ram-estimate";
  r.domain = "ram";
  r.energy_j = 0.9e6;
  m.domains = {c, r};
  return m;
}
std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool q = false;
  for (char ch : line) {
    if (ch == '"')
      q = !q;
    else if (ch == ',' && !q)
      out.push_back(cur), cur.clear();
    else
      cur += ch;
  }
  out.push_back(cur);
  return out;
}
}  // namespace

TEST(Report, CodeCarbonCsvColumnsAndUnits) {
  TempDir d;
  auto m = sample_measurement();
  RunInfo run;
  run.run_id = "r1";
  append_codecarbon_csv(d / "emissions.csv", m, run);
  append_codecarbon_csv(d / "emissions.csv", m, run);
  std::ifstream f(d / "emissions.csv");
  std::string header, row1, row2, extra;
  std::getline(f, header);
  std::getline(f, row1);
  std::getline(f, row2);
  EXPECT_FALSE(std::getline(f, extra));
  auto h = split(header), v = split(row1);
  ASSERT_EQ(h.size(), v.size());
  auto col = [&](const std::string& n) {
    for (size_t i = 0; i < h.size(); ++i)
      if (h[i] == n) return v[i];
    return std::string("<missing>");
  };
  for (auto n : {"timestamp",
                 "project_name",
                 "run_id",
                 "duration",
                 "emissions",
                 "emissions_rate",
                 "cpu_power",
                 "gpu_power",
                 "ram_power",
                 "cpu_energy",
                 "gpu_energy",
                 "ram_energy",
                 "energy_consumed",
                 "country_name",
                 "region",
                 "os",
                 "cpu_count",
                 "cpu_model",
                 "ram_total_size",
                 "tracking_mode",
                 "pue"})
    EXPECT_NE(col(n), "<missing>") << n;
  EXPECT_EQ(col("run_id"), "r1");
  EXPECT_DOUBLE_EQ(std::stod(col("duration")), 10);
  EXPECT_DOUBLE_EQ(std::stod(col("energy_consumed")), 1.0);  // kWh
  EXPECT_DOUBLE_EQ(std::stod(col("cpu_energy")), 0.75);
  EXPECT_DOUBLE_EQ(std::stod(col("ram_energy")), 0.25);
  EXPECT_DOUBLE_EQ(std::stod(col("emissions")), 0.475);        // kg
  EXPECT_DOUBLE_EQ(std::stod(col("emissions_rate")), 0.0475);  // kg/s
  EXPECT_DOUBLE_EQ(std::stod(col("cpu_power")), 2.7e5);        // W
  EXPECT_EQ(col("energy_method").rfind("estimated", 0), 0u);
}

TEST(Report, CsvWithAnotherHeaderIsKeptAsBackup) {
  TempDir d;
  write_file(d / "e.csv", "a,b\n1,2\n");
  append_codecarbon_csv(d / "e.csv", sample_measurement(), RunInfo{});
  std::ifstream bak(d / "e.csv.bak");
  std::string l;
  std::getline(bak, l);
  EXPECT_EQ(l, "a,b");
  std::ifstream f(d / "e.csv");
  std::getline(f, l);
  EXPECT_EQ(l.rfind("timestamp,project_name,run_id", 0), 0u);
}

TEST(Report, JsonHasNullForUndefinedPower) {
  auto m = sample_measurement();
  m.avg_power_w.reset();
  auto j = to_json(m);
  EXPECT_TRUE(j["avg_power_w"].is_null());
  EXPECT_EQ(j["domains"].size(), 2u);
  EXPECT_EQ(j["estimated"], true);
  TempDir d;
  write_json_file(d / "m.json", j);
  std::ifstream f(d / "m.json");
  EXPECT_EQ(nlohmann::json::parse(f)["g_co2e"], 475);
}

TEST(Report, SummaryLine) {
  auto m = sample_measurement();
  m.avg_power_w = 12.34;
  m.energy_j = 45;
  EXPECT_EQ(summary_line(m, 100), "12.3 W, 0.45 J/token (estimated)");
  m.estimated = false;
  m.avg_power_w.reset();
  EXPECT_EQ(summary_line(m), "power undefined");
}

// Issue 12, part 3: unknown energy is null / empty with the reason in every output, never 0.
TEST(Report, UnknownEnergyIsNullInJsonEmptyInCsvAndSaidInTheLine) {
  Measurement m;
  m.name = "w";
  m.duration_s = 2;
  m.energy_unknown_reason = "no sensor could be read by this process (nvml: no driver)";
  m.flags.push_back("no sensor counted: energy is unknown, not 0");
  auto j = to_json(m);
  EXPECT_TRUE(j["energy_j"].is_null());
  EXPECT_TRUE(j["g_co2e"].is_null());
  EXPECT_EQ(j["energy_unknown_reason"], m.energy_unknown_reason);
  EXPECT_EQ(summary_line(m, 100), "energy unknown");
  const std::string row = codecarbon_row(m, RunInfo{});
  std::vector<std::string> cols;
  std::string cur;
  bool quoted = false;
  for (char c : row) {
    if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      cols.push_back(std::exchange(cur, ""));
    else
      cur += c;
  }
  cols.push_back(cur);
  ASSERT_EQ(cols.size(), codecarbon_columns().size());
  for (const char* k : {"emissions", "emissions_rate", "cpu_power", "gpu_power", "ram_power",
                        "cpu_energy", "gpu_energy", "ram_energy", "energy_consumed"}) {
    const auto i = std::find(codecarbon_columns().begin(), codecarbon_columns().end(), k) -
                   codecarbon_columns().begin();
    EXPECT_EQ(cols[i], "") << k;
  }
  const auto flags =
      std::find(codecarbon_columns().begin(), codecarbon_columns().end(), "energy_flags") -
      codecarbon_columns().begin();
  EXPECT_EQ(cols[flags].rfind("energy unknown: no sensor could be read", 0), 0u) << cols[flags];
}

TEST(Report, RunIdIsUuid4) {
  auto id = make_run_id();
  EXPECT_EQ(id.size(), 36u);
  EXPECT_EQ(id[14], '4');
}

TEST(Metrics, PerTokenAndPerJoule) {
  EXPECT_DOUBLE_EQ(*joules_per_token(50, 100), 0.5);
  EXPECT_DOUBLE_EQ(*tokens_per_joule(100, 50), 2.0);
  EXPECT_DOUBLE_EQ(*gflops_per_watt(2e12, 100), 20.0);  // 2 TFLOP in 100 J = 20 GFLOP/J
  EXPECT_FALSE(joules_per_token(50, 0));
  EXPECT_FALSE(tokens_per_joule(100, 0));
  EXPECT_FALSE(gflops_per_watt(1, 0));
}

}  // namespace gt::energy
