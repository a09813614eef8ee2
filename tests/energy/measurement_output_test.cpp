// tests/energy/report_test.cpp: CodeCarbon CSV, JSON, summaries, metrics.
#include "energy/measurement_output.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.h"
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
  c.avg_power_w = 2.7e5;  // as the meter gives it: energy / duration when defined
  DomainMeasurement r;
  r.sensor = "ram-estimate";
  r.domain = "ram";
  r.energy_j = 0.9e6;
  r.avg_power_w = 0.9e5;
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

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The value of column `name` in row `row` (1 = first after the header) of CSV text.
std::string csv_cell(const std::string& text, size_t row, const std::string& name) {
  std::istringstream in(text);
  std::string header, line;
  std::getline(in, header);
  for (size_t i = 0; i < row; ++i) std::getline(in, line);
  auto h = split(header), v = split(line);
  for (size_t i = 0; i < h.size() && i < v.size(); ++i)
    if (h[i] == name) return v[i];
  return "<missing>";
}

// Issue 29 §4: CodeCarbon 3.x's 38 columns in its order, then greentrain's four.
TEST(Report, CodeCarbon3ColumnsInItsOrder) {
  const std::string cc3 =
      "timestamp,project_name,run_id,experiment_id,duration,emissions,emissions_rate,cpu_power,"
      "gpu_power,ram_power,cpu_energy,gpu_energy,ram_energy,energy_consumed,water_consumed,"
      "country_name,country_iso_code,region,cloud_provider,cloud_region,os,python_version,"
      "codecarbon_version,cpu_count,cpu_model,gpu_count,gpu_model,longitude,latitude,"
      "ram_total_size,tracking_mode,cpu_utilization_percent,gpu_utilization_percent,"
      "ram_utilization_percent,ram_used_gb,on_cloud,pue,wue";
  std::string ours;
  for (auto& c : codecarbon_columns()) ours += (ours.empty() ? "" : ",") + c;
  EXPECT_EQ(ours, cc3 + ",energy_method,energy_flags,carbon_intensity,carbon_source");
  EXPECT_EQ(split(cc3).size(), 38u);
}

// Issue 29 §4: pue multiplies the energies and the emissions as CodeCarbon's does (each
// device's energy x pue), not the powers; wue gives water_consumed (L) from energy_consumed.
TEST(Report, PueMultipliesEnergiesAndEmissionsWueGivesWater) {
  TempDir d;
  RunInfo run;
  run.pue = 1.5;
  run.wue = 2.0;
  append_codecarbon_csv(d / "e.csv", sample_measurement(), run);
  const std::string t = slurp(d / "e.csv");
  EXPECT_DOUBLE_EQ(std::stod(csv_cell(t, 1, "energy_consumed")), 1.5);  // kWh: 1 x 1.5
  EXPECT_DOUBLE_EQ(std::stod(csv_cell(t, 1, "cpu_energy")), 0.75 * 1.5);
  EXPECT_DOUBLE_EQ(std::stod(csv_cell(t, 1, "ram_energy")), 0.25 * 1.5);
  EXPECT_DOUBLE_EQ(std::stod(csv_cell(t, 1, "emissions")), 0.475 * 1.5);
  EXPECT_DOUBLE_EQ(std::stod(csv_cell(t, 1, "emissions_rate")), 0.0475 * 1.5);
  EXPECT_DOUBLE_EQ(std::stod(csv_cell(t, 1, "cpu_power")), 2.7e5);     // the device's own
  EXPECT_DOUBLE_EQ(std::stod(csv_cell(t, 1, "water_consumed")), 3.0);  // 1.5 kWh x 2 L/kWh
  EXPECT_EQ(csv_cell(t, 1, "pue"), "1.5");
  EXPECT_EQ(csv_cell(t, 1, "wue"), "2");
  // no wue: the water is unknown (empty), never 0; utilization is not sampled (empty)
  append_codecarbon_csv(d / "e.csv", sample_measurement(), RunInfo{});
  const std::string t2 = slurp(d / "e.csv");
  EXPECT_EQ(csv_cell(t2, 2, "water_consumed"), "");
  EXPECT_EQ(csv_cell(t2, 2, "wue"), "");
  EXPECT_EQ(csv_cell(t2, 2, "cpu_utilization_percent"), "");
  run.pue = 0.5;
  EXPECT_THROW(codecarbon_row(sample_measurement(), run), Error);
  run.pue = 1;
  run.wue = -1;
  EXPECT_THROW(codecarbon_row(sample_measurement(), run), Error);
}

// Issue 31 §2: 12 processes appending at once keep every row (new file and existing file).
TEST(Report, ConcurrentAppendsFromProcessesNeverLoseARow) {
  TempDir d;
  for (int round = 0; round < 2; ++round) {  // round 0: a new file; round 1: it exists
    std::vector<pid_t> kids;
    for (int k = 0; k < 12; ++k) {
      pid_t pid = fork();
      if (pid == 0) {
        int code = 0;
        try {
          for (int r = 0; r < 5; ++r) {
            RunInfo run;
            run.run_id =
                "w" + std::to_string(round) + "-" + std::to_string(k) + "-" + std::to_string(r);
            append_codecarbon_csv(d / "emissions.csv", sample_measurement(), run);
          }
        } catch (...) {
          code = 1;
        }
        _exit(code);
      }
      kids.push_back(pid);
    }
    for (pid_t p : kids) {
      int st = 0;
      waitpid(p, &st, 0);
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
  }
  const std::string t = slurp(d / "emissions.csv");
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 1 + 2 * 12 * 5);
  EXPECT_EQ(t.find("timestamp", 1), std::string::npos) << "one header only";
  for (int round = 0; round < 2; ++round)
    for (int k = 0; k < 12; ++k)
      for (int r = 0; r < 5; ++r) {
        const std::string id =
            ",w" + std::to_string(round) + "-" + std::to_string(k) + "-" + std::to_string(r) + ",";
        EXPECT_NE(t.find(id), std::string::npos) << id;
      }
}

// Issue 31 §2: a CodeCarbon file (its own columns, its own order) is never moved: the row goes
// under its header, the columns both have; the file's rows stay as they were.
TEST(Report, CodeCarbonFileGetsTheRowUnderItsOwnHeader) {
  TempDir d;
  const std::string head =
      "timestamp,project_name,run_id,duration,emissions,emissions_rate,cpu_power,gpu_power,"
      "ram_power,cpu_energy,gpu_energy,ram_energy,energy_consumed,country_name,country_iso_code,"
      "region,cloud_provider,cloud_region,os,python_version,codecarbon_version,cpu_count,"
      "cpu_model,gpu_count,gpu_model,longitude,latitude,ram_total_size,tracking_mode,on_cloud,"
      "pue,their_own\n";
  const std::string run_a =
      "2024-04-01T11:37:44,codecarbon,run-a,1434.4,0.0003,2.2e-07,0.23,0.04,12.0,0.0014,0.0004,"
      "0.0028,0.0047,France,FRA,bfc,,,macOS,3.11.4,2.3.4,10,Apple M1 Pro,1,Apple M1 Pro,3.1,46.9,"
      "32.0,machine,N,1.0,x\n";
  write_file(d / "emissions.csv", head + run_a);
  RunInfo run;
  run.run_id = "ours";
  const auto r = append_codecarbon_csv(d / "emissions.csv", sample_measurement(), run);
  EXPECT_FALSE(std::filesystem::exists(d / "emissions.csv.bak"));
  const std::string t = slurp(d / "emissions.csv");
  EXPECT_EQ(t.rfind(head + run_a, 0), 0u) << "the file's lines are kept as they were";
  EXPECT_EQ(csv_cell(t, 2, "run_id"), "ours");
  EXPECT_DOUBLE_EQ(std::stod(csv_cell(t, 2, "energy_consumed")), 1.0);
  EXPECT_EQ(csv_cell(t, 2, "their_own"), "");
  EXPECT_EQ(split(t.substr(t.rfind('\n', t.size() - 2) + 1)).size(), split(head).size());
  EXPECT_NE(std::find(r.left_out.begin(), r.left_out.end(), "energy_flags"), r.left_out.end());
  EXPECT_EQ(r.left_empty, std::vector<std::string>{"their_own"});
  EXPECT_FALSE(r.created);
}

// Issue 31 §2: a file that is not an emissions CSV is refused with the reason and its name,
// and left exactly as it was.
TEST(Report, FileThatIsNotAnEmissionsCsvIsRefusedAndKept) {
  TempDir d;
  write_file(d / "e.csv", "a,b\n1,2\n");
  try {
    append_codecarbon_csv(d / "e.csv", sample_measurement(), RunInfo{});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(d / "e.csv"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not an emissions.csv header"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(slurp(d / "e.csv"), "a,b\n1,2\n");
  EXPECT_FALSE(std::filesystem::exists(d / "e.csv.bak"));
  EXPECT_THROW(check_codecarbon_csv_writable(d / "e.csv"), Error);
  EXPECT_THROW(check_codecarbon_csv_writable(d / "no-such-folder/e.csv"), Error);
  EXPECT_NO_THROW(check_codecarbon_csv_writable(d / "new.csv"));
  EXPECT_FALSE(std::filesystem::exists(d / "new.csv"));
}

// A file whose last row lacks its line break (a writer killed mid-row) and uses CRLF: the new
// row starts on its own line, with the file's line ending.
TEST(Report, AppendAfterATruncatedRowAndWithCrlf) {
  TempDir d;
  std::string header;
  for (auto& c : codecarbon_columns()) header += (header.empty() ? "" : ",") + c;
  write_file(d / "e.csv", header + "\r\n2024-01-01T00:00:00,half");
  append_codecarbon_csv(d / "e.csv", sample_measurement(), RunInfo{});
  const std::string t = slurp(d / "e.csv");
  EXPECT_NE(t.find("half\r\n"), std::string::npos);
  EXPECT_EQ(t.substr(t.size() - 2), "\r\n");
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

// A window shorter than a sensor's refresh period: the peak is as undefined as the average
// (null, not 0.0), in the totals and per domain; the CSV's powers are empty, not J / s.
TEST(Report, UndefinedPowerIsNullPeakAndEmptyCsvPower) {
  auto m = sample_measurement();
  m.duration_s = 0.002;
  m.energy_j = 0.01;
  m.domains[0].energy_j = 0.008;
  m.domains[0].avg_power_w.reset();  // shorter than the CPU estimate's refresh period
  m.domains[1].energy_j = 0.002;
  m.domains[1].avg_power_w = 1.0;  // the RAM estimate has a power, the CPU's has none
  m.domains[1].peak_power_w = 1.0;
  m.avg_power_w.reset();
  const auto j = to_json(m);
  EXPECT_FALSE(j["energy_j"].is_null());
  EXPECT_TRUE(j["avg_power_w"].is_null());
  EXPECT_TRUE(j["peak_power_w"].is_null()) << j["peak_power_w"];
  EXPECT_TRUE(j["domains"][0]["peak_power_w"].is_null()) << j["domains"][0];
  EXPECT_EQ(j["domains"][1]["peak_power_w"], 1.0);
  const auto cols = split(codecarbon_row(m, RunInfo{}));
  ASSERT_EQ(cols.size(), codecarbon_columns().size());
  auto col = [&](const char* k) {
    return cols[std::find(codecarbon_columns().begin(), codecarbon_columns().end(), k) -
                codecarbon_columns().begin()];
  };
  EXPECT_EQ(col("cpu_power"), "") << "not energy / duration";
  EXPECT_EQ(col("ram_power"), "1");
  EXPECT_EQ(col("gpu_power"), "0") << "no GPU domain: 0 W, as CodeCarbon";
  EXPECT_NE(col("cpu_energy"), "");
  m.domains[0].avg_power_w = 4.0;  // both defined: the sum of the domains' powers
  const auto both = split(codecarbon_row(m, RunInfo{}));
  EXPECT_EQ(both[std::find(codecarbon_columns().begin(), codecarbon_columns().end(), "cpu_power") -
                 codecarbon_columns().begin()],
            "4");
}

namespace {
// The value in column `k` of a row's fields.
std::string cell(const std::vector<std::string>& cols, const char* k) {
  return cols[std::find(codecarbon_columns().begin(), codecarbon_columns().end(), k) -
              codecarbon_columns().begin()];
}
}  // namespace

// A GPU asked for and not read (Python's Meter(gpus=[0], strict=False)) gave gpu_energy and
// gpu_power 0, CodeCarbon's "no GPU": they are unknown, empty. energy_method read "measured; "
// when nothing was counted.
TEST(Report, CodeCarbonRowLeavesGpusAskedForAndNotReadEmpty) {
  auto m = sample_measurement();
  auto cols = split(codecarbon_row(m, RunInfo{}));
  EXPECT_EQ(cell(cols, "gpu_energy"), "0") << "no GPU asked for: CodeCarbon's 0";
  m.flags.push_back(std::string("gpus [0] ") + kGpusNotMeasured + ": no GPU can be read");
  cols = split(codecarbon_row(m, RunInfo{}));
  EXPECT_EQ(cell(cols, "gpu_energy"), "");
  EXPECT_EQ(cell(cols, "gpu_power"), "");
  EXPECT_EQ(cell(cols, "gpu_count"), "") << "the GPUs asked for are unknown, not CodeCarbon's 0";
  EXPECT_NE(cell(cols, "cpu_energy"), "");
  EXPECT_EQ(cell(cols, "energy_method").rfind("estimated; cpu-estimate", 0), 0u);
  Measurement none;
  none.duration_s = 1;
  none.energy_unknown_reason = "no sensor counted";
  EXPECT_EQ(cell(split(codecarbon_row(none, RunInfo{})), "energy_method"), "none");
}

// region was the intensity's label ("world average" from the program) and python_version was
// always empty: both are what the writer was told, as CodeCarbon writes them.
TEST(Report, CodeCarbonRowHasTheRegionAndPythonVersionItWasTold) {
  RunInfo told;
  told.region = "quebec";
  told.python_version = "3.11.2";
  auto cols = split(codecarbon_row(sample_measurement(), told));
  EXPECT_EQ(cell(cols, "region"), "quebec");
  EXPECT_EQ(cell(cols, "python_version"), "3.11.2");
  cols = split(codecarbon_row(sample_measurement(), RunInfo{}));
  EXPECT_EQ(cell(cols, "region"), "");
  EXPECT_EQ(cell(cols, "python_version"), "");
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
