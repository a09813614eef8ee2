// `greentrain train` and carbon intensity (issue 12.6): energy.carbon_intensity = 0 is used as 0
// (it became the 475 default), unset stays unset across a resume, a series CSV is read by the
// one reader (byte order mark, CRLF, rows with their own offset), a hole in the series is
// flagged, and every output (console, metrics.jsonl, summary.json, energy.csv) names the
// intensity used and where it came from.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_helpers.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using test::run_cmd;

const std::string kBin = GT_BINARY;
// Long enough (about a second) that the CPU estimate has seen some joules: a series' intensity
// over a window is its energy-weighted mean, unknown when the window has no energy.
const std::string kLonger = " --set train.max_steps=40";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

nlohmann::json summary(const std::string& run) {
  return nlohmann::json::parse(slurp(fs::path(run) / "summary.json"));
}

// How many times `what` occurs in `s`.
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The energy.csv row's value in column `name` (the header and one row; quoted fields allowed).
std::string csv_column(const std::string& run, const std::string& name) {
  std::istringstream in(slurp(fs::path(run) / "energy.csv"));
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  auto split = [](const std::string& line) {
    std::vector<std::string> out(1);
    bool q = false;
    for (char c : line) {
      if (c == '"')
        q = !q;
      else if (c == ',' && !q)
        out.emplace_back();
      else
        out.back() += c;
    }
    return out;
  };
  auto h = split(header), v = split(row);
  for (size_t i = 0; i < h.size() && i < v.size(); ++i)
    if (h[i] == name) return v[i];
  return "<missing>";
}

// "YYYY-MM-DDTHH:MM:SS+02:00" of a unix time, as a site in UTC+2 would write it.
std::string plus2(std::int64_t unix_s) {
  using namespace std::chrono;
  const sys_seconds t{seconds{unix_s + 7200}};
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss hms{t - day};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d+02:00",
                static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                static_cast<unsigned>(ymd.day()), static_cast<int>(hms.hours().count()),
                static_cast<int>(hms.minutes().count()), static_cast<int>(hms.seconds().count()));
  return buf;
}

struct CarbonCli : ::testing::Test {
  test::TempDir d;
  std::string cfg;
  std::string bin;  // greentrain with its own energy lock folder: another greentrain on this
                    // machine (a parallel test) would otherwise be the sensors' one reader
  void SetUp() override {
    bin = "GT_ENERGY_LOCK_DIR=" + d.file("locks") + " " + kBin;
    test::write_file(d.file("t.txt"), test::sample_text(5000));
    cfg = d.file("tiny.toml");
    test::write_file(cfg,
                     "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 8\n"
                     "[train]\nbatch_size = 4\nmax_steps = 4\nwarmup_steps = 1\n"
                     "eval_interval = 0\neval_steps = 1\ncheckpoint_interval = 0\nthreads = 2\n"
                     "log_interval = 1\n[data]\npath = \"" +
                         d.file("t.txt") + "\"\n");
  }
  // `cmd`'s exit code and its standard output; its standard error in *err.
  test::CmdResult run_split(const std::string& cmd, std::string* err) {
    auto r = run_cmd("( (" + cmd + ") 2>" + d.file("stderr.txt") + " )");  // inside run_cmd's 2>&1
    *err = slurp(d.file("stderr.txt"));
    return r;
  }
  // A CSV written by a UTC+2 site: byte order mark, CRLF, each row with its +02:00 offset;
  // hourly rows at the hours `hours` from the present hour H (UTC), value 100 x (k + 10)
  // x `scale` (0.001: the values in kg/kWh).
  std::string series(const std::string& name, const std::vector<int>& hours, double scale = 1) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const std::int64_t h = now / 3600 * 3600;
    std::string text = "\xEF\xBB\xBFTime,Carbon Intensity\r\n";
    for (int k : hours)
      text += plus2(h + k * 3600) + "," + fmt_value(100 * (k + 10) * scale) + "\r\n";
    test::write_file(d.file(name), text);
    return d.file(name);
  }
  static std::string fmt_value(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  }
  // The UTC text of hour H + k (as the flags write times).
  static std::string utc_hour(int k) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    using namespace std::chrono;
    const sys_seconds t{seconds{now / 3600 * 3600 + k * 3600}};
    const auto day = floor<days>(t);
    const year_month_day ymd{day};
    char buf[40];
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:00:00Z", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                  static_cast<int>(hh_mm_ss{t - day}.hours().count()));
    return buf;
  }
};

TEST_F(CarbonCli, ZeroIntensityIsZeroInEveryOutputAndSurvivesResume) {
  const std::string run = d.file("zero");
  auto r = run_cmd(bin + " train " + cfg + " --set energy.carbon_intensity=0 --out " + run +
                   " --stop-at 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // console: the header line, every progress line, the closing lines
  EXPECT_NE(r.output.find("carbon   0 gCO2e/kWh, constant from energy.carbon_intensity"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(0 gCO2e/kWh, constant)"), std::string::npos) << r.output;
  auto s = summary(run);
  EXPECT_EQ(s["g_co2e"].get<double>(), 0.0);
  EXPECT_EQ(s["carbon_g_per_kwh"].get<double>(), 0.0);
  EXPECT_EQ(s["carbon_origin"], "constant");
  EXPECT_EQ(s["carbon_source"], "0 gCO2e/kWh, constant from energy.carbon_intensity");
  EXPECT_EQ(csv_column(run, "carbon_intensity"), "0");
  EXPECT_EQ(csv_column(run, "carbon_source"), "0 gCO2e/kWh, constant from energy.carbon_intensity");
  int lines = 0;
  std::istringstream metrics(slurp(fs::path(run) / "metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("g_co2e")) continue;
    ++lines;
    EXPECT_EQ(j["carbon_g_per_kwh"].get<double>(), 0.0) << line;
    EXPECT_EQ(j["carbon_origin"], "constant") << line;
  }
  EXPECT_GT(lines, 0);
  // the resolved configuration keeps the 0, so the resumed session uses it too
  EXPECT_NE(slurp(fs::path(run) / "config.toml").find("carbon_intensity = 0"), std::string::npos);
  auto res = run_cmd(bin + " train --out " + run + " --resume");
  ASSERT_EQ(res.exit_code, 0) << res.output;
  EXPECT_EQ(summary(run)["carbon_g_per_kwh"].get<double>(), 0.0);
  EXPECT_EQ(summary(run)["g_co2e"].get<double>(), 0.0);
}

TEST_F(CarbonCli, UnsetIsTheDefaultAndSaysSo) {
  const std::string run = d.file("default");
  auto r = run_cmd(bin + " train " + cfg + " --out " + run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("carbon   475 gCO2e/kWh, default"), std::string::npos) << r.output;
  auto s = summary(run);
  EXPECT_EQ(s["carbon_origin"], "default");
  EXPECT_EQ(s["carbon_g_per_kwh"].get<double>(), 475.0);
  EXPECT_EQ(csv_column(run, "carbon_intensity"), "475");
  // CodeCarbon's region is a province or cloud region: the default's label "world average" is
  // not one (it was written there, while Python's rows left it empty); no Python, no version
  EXPECT_EQ(csv_column(run, "region"), "");
  EXPECT_EQ(csv_column(run, "python_version"), "");
  // unset is written as unset, not as a number that a resume would read as a choice
  EXPECT_EQ(slurp(fs::path(run) / "config.toml").find("carbon_intensity"), std::string::npos);
}

TEST_F(CarbonCli, BothAConstantAndASeriesIsAnError) {
  auto r =
      run_cmd(bin + " train " + cfg + " --set energy.carbon_intensity=0 --set " +
              "energy.carbon_csv=" + series("ci.csv", {-1, 0, 1}) + " --out " + d.file("both"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("both set"), std::string::npos) << r.output;
}

// Rows with their own +02:00 offset: the present hour H (UTC) reads row H's 1000 (or, should
// the run cross the hour, up to row H+1's 1100); dropping the offset read row H-2's 800.
TEST_F(CarbonCli, SeriesWithBomCrlfAndOffsetsIsRead) {
  const std::string csv = series("ci.csv", {-3, -2, -1, 0, 1, 2, 3});
  const std::string run = d.file("series");
  auto r = run_cmd(bin + " train " + cfg + " --set energy.carbon_csv=" + csv + kLonger + " --out " +
                   run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto s = summary(run);
  EXPECT_EQ(s["carbon_origin"], "csv");
  EXPECT_NE(s["carbon_source"].get<std::string>().find(csv), std::string::npos) << s.dump(2);
  ASSERT_TRUE(s["carbon_g_per_kwh"].is_number()) << s.dump(2);
  EXPECT_GE(s["carbon_g_per_kwh"].get<double>(), 1000 - 1e-6);
  EXPECT_LE(s["carbon_g_per_kwh"].get<double>(), 1100 + 1e-6);
  EXPECT_NE(csv_column(run, "carbon_source").find(csv), std::string::npos);
  EXPECT_NE(r.output.find("carbon   series " + csv), std::string::npos) << r.output;
}

// A hole around the present hour in an hourly series: the value before it is held and the run
// says so (summary flags, console), instead of bridging it silently.
TEST_F(CarbonCli, HoleInTheSeriesIsFlagged) {
  const std::string csv = series("hole.csv", {-4, -3, -2, 3, 4});
  const std::string run = d.file("hole");
  auto r = run_cmd(bin + " train " + cfg + " --set energy.carbon_csv=" + csv + kLonger + " --out " +
                   run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto s = summary(run);
  EXPECT_NEAR(s["carbon_g_per_kwh"].get<double>(), 800, 1e-9);  // row H-2, held
  bool flagged = false;
  for (auto& f : s["energy"]["flags"])
    flagged = flagged || f.get<std::string>().find("no rows from") != std::string::npos;
  EXPECT_TRUE(flagged) << s["energy"]["flags"].dump();
  EXPECT_NE(r.output.find("flag: carbon: no rows from"), std::string::npos) << r.output;
}

// A series that ended hours before the run (an old download): its last value is held, and every
// output says so, naming the series' last row and the measured interval: stderr once, while the
// run goes (its first interval); summary.json; each metrics.jsonl energy line; the report.
TEST_F(CarbonCli, SeriesThatEndedBeforeTheRunIsFlaggedInEveryOutput) {
  const std::string csv = series("old.csv", {-6, -5, -4});  // covers up to H-3
  const std::string run = d.file("old");
  std::string err;
  auto r =
      run_split(bin + " train " + cfg + " --set energy.carbon_csv=" + csv + " --out " + run, &err);
  ASSERT_EQ(r.exit_code, 0) << r.output << err;
  const std::string last_row = "last row at " + utc_hour(-4);
  EXPECT_EQ(count(err, "greentrain train: warning: carbon: the measured interval "), 1u) << err;
  EXPECT_NE(err.find(last_row), std::string::npos) << err;
  EXPECT_NE(err.find("its last value, 600 gCO2e/kWh, was used"), std::string::npos) << err;
  auto has_flag = [&](const nlohmann::json& flags) {
    for (auto& f : flags)
      if (f.get<std::string>().find("carbon: the measured interval ") == 0 &&
          f.get<std::string>().find(last_row) != std::string::npos &&
          f.get<std::string>().find(csv) != std::string::npos)
        return true;
    return false;
  };
  auto s = summary(run);
  EXPECT_TRUE(has_flag(s["energy_flags"])) << s.dump(2);
  EXPECT_TRUE(has_flag(s["energy"]["flags"])) << s.dump(2);
  EXPECT_NEAR(s["carbon_g_per_kwh"].get<double>(), 600, 1e-9);  // row H-4, held
  int lines = 0;
  std::istringstream metrics(slurp(fs::path(run) / "metrics.jsonl"));
  for (std::string line; std::getline(metrics, line);) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("energy_interval_tokens")) continue;
    ++lines;
    EXPECT_TRUE(has_flag(j.value("energy_flags", nlohmann::json::array()))) << line;
  }
  EXPECT_GT(lines, 0);
  const std::string html = slurp(fs::path(run) / "report.html");
  EXPECT_NE(html.find("id=gt-carbon-flags"), std::string::npos);
  EXPECT_NE(html.find(last_row), std::string::npos);
}

// A series in kg/kWh (0.35 to 0.65 for 350 to 650 g): one warning on stderr before the data is
// loaded, naming the file, the first value and the unit to set; the run goes on with the values
// as read.
TEST_F(CarbonCli, SeriesInKgPerKwhIsWarnedOnce) {
  const std::string csv = series("kg.csv", {-3, -2, -1, 0, 1, 2, 3}, 0.0005);
  std::string err;
  auto r = run_split(
      bin + " train " + cfg + " --set energy.carbon_csv=" + csv + " --out " + d.file("kg"), &err);
  ASSERT_EQ(r.exit_code, 0) << r.output << err;
  EXPECT_EQ(count(err, "warning: carbon series " + csv + ": 7 of 7 values lie outside"), 1u) << err;
  EXPECT_EQ(count(err, "warning: carbon"), 1u) << err;
  EXPECT_NE(err.find("set energy.carbon_unit = 'kg/kWh'"), std::string::npos) << err;
}

// `greentrain schedule` says it once too, on stderr and in its JSON's carbon_warnings.
TEST_F(CarbonCli, ScheduleWarnsOfASeriesInKgPerKwh) {
  test::write_file(d.file("kg.csv"),
                   "Time,Carbon Intensity\n2020-01-01 00:00:00,0.3\n2020-01-01 01:00:00,0.1\n"
                   "2020-01-01 02:00:00,0.2\n2020-01-01 03:00:00,0.4\n");
  test::write_file(d.file("jobs.toml"),
                   "[[job]]\nname = \"a\"\ncommand = \"true\"\nduration_s = 3600\npower_w = 100\n"
                   "earliest_start = 2020-01-01T00:00:00\ndeadline = 2020-01-01T04:00:00\n");
  std::string err;
  auto r = run_split(kBin + " schedule " + d.file("jobs.toml") + " --carbon-csv " +
                         d.file("kg.csv") + " --utc-offset 0 --json " + d.file("plan.json"),
                     &err);
  ASSERT_EQ(r.exit_code, 0) << r.output << err;
  EXPECT_EQ(count(err, "greentrain schedule: warning: carbon series " + d.file("kg.csv") +
                           ": 4 of 4 values lie outside"),
            1u)
      << err;
  EXPECT_NE(err.find("set --carbon-unit kg/kWh"), std::string::npos) << err;
  const auto plan = nlohmann::json::parse(slurp(d.file("plan.json")));
  ASSERT_EQ(plan["carbon_warnings"].size(), 1u) << plan.dump(2);
  EXPECT_NE(plan["carbon_warnings"][0].get<std::string>().find("0.3 gCO2e/kWh at"),
            std::string::npos);
}

// --carbon-format, --carbon-unit and --carbon-value with a value that is not one of their
// choices were refused only when the file was read (exit 1): they are refused while the command
// line is read (exit 2), naming the value and the choices, on every command that has them
// (measure, schedule). The same in a configuration (energy.carbon_*) stays an error of the file
// (exit 1) naming the key.
TEST_F(CarbonCli, CarbonReadingChoicesAreCheckedWithTheCommandLine) {
  const std::string csv = series("ci.csv", {0, 1, 2});
  test::write_file(d.file("jobs.toml"),
                   "[[job]]\nname = \"a\"\ncommand = \"true\"\nduration_s = 3600\npower_w = 100\n");
  const std::pair<std::string, std::string> cases[] = {
      {"--carbon-format watt", "--carbon-format: 'watt' is not known; expected auto, greentrain"},
      {"--carbon-unit g", "--carbon-unit: 'g' is not known; expected g/kWh (= gCO2e/kWh"},
      {"--carbon-value predicted",
       "--carbon-value: 'predicted' is not known; expected actual or forecast"}};
  for (const auto& [option, needle] : cases)
    for (const std::string cmd : {" measure --carbon-csv " + csv + " " + option + " -- true",
                                  " schedule " + d.file("jobs.toml") + " --carbon-csv " + csv +
                                      " --utc-offset 0 " + option}) {
      auto r = run_cmd(bin + cmd);
      EXPECT_EQ(r.exit_code, 2) << cmd << ": " << r.output;
      EXPECT_NE(r.output.find(needle), std::string::npos) << cmd << ": " << r.output;
    }
  // a choice in another case is the same choice
  auto ok = run_cmd(bin + " measure --carbon-csv " + csv + " --carbon-format GreenTrain " +
                    "--carbon-unit KG/MWH -- true");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  // a configuration's key: the file's error, before the data is loaded
  auto key = run_cmd(bin + " train " + cfg + " --set energy.carbon_csv=" + csv +
                     " --set energy.carbon_format=watt --out " + d.file("run"));
  EXPECT_EQ(key.exit_code, 1) << key.output;
  EXPECT_NE(key.output.find("energy.carbon_format 'watt' is not known; expected auto"),
            std::string::npos)
      << key.output;
}

// schedule's warnings of a hole in the series went to standard output between the plan's lines:
// they go to standard error, as its other warnings, and into its JSON's carbon_warnings.
TEST_F(CarbonCli, ScheduleWarnsOfAHoleOnStandardError) {
  test::write_file(d.file("hole.csv"),
                   "Time,Carbon Intensity\n2020-01-01 00:00:00,300\n2020-01-01 01:00:00,100\n"
                   "2020-01-01 04:00:00,200\n2020-01-01 05:00:00,400\n");
  test::write_file(d.file("jobs.toml"),
                   "[[job]]\nname = \"a\"\ncommand = \"true\"\nduration_s = 3600\npower_w = 100\n"
                   "earliest_start = 2020-01-01T00:00:00\ndeadline = 2020-01-01T06:00:00\n");
  std::string err;
  auto r = run_split(kBin + " schedule " + d.file("jobs.toml") + " --carbon-csv " +
                         d.file("hole.csv") + " --utc-offset 0 --json " + d.file("plan.json"),
                     &err);
  ASSERT_EQ(r.exit_code, 0) << r.output << err;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("planned in"), std::string::npos) << r.output;  // the plan is there
  const std::string warning = "greentrain schedule: warning: carbon series " + d.file("hole.csv") +
                              ": no rows from 2020-01-01T02:00:00Z to 2020-01-01T04:00:00Z";
  EXPECT_EQ(count(err, warning), 1u) << err;
  const auto plan = nlohmann::json::parse(slurp(d.file("plan.json")));
  ASSERT_EQ(plan["carbon_warnings"].size(), 1u) << plan.dump(2);
  EXPECT_NE(plan["carbon_warnings"][0].get<std::string>().find("no rows from"), std::string::npos);
}

}  // namespace
}  // namespace gt
