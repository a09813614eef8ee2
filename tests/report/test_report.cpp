// The HTML report: written by `train` at the end of every run (SIGTERM too) and by
// `greentrain report`; opened in headless Chromium, it draws every chart without a console
// error (the page records what it drew into #gt-selfcheck); a damaged run folder still gives a
// report that says what is missing. Screenshots are kept in GT_TEST_OUTPUT.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "chromium_util.h"
#include "core/error.h"
#include "report/report.h"
#include "report/series.h"
#include "report_test_util.h"
#include "test_util.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using namespace test;

TEST(Report, TrainWritesItAndEveryChartIsDrawnInChromium) {
  GT_NEEDS_CPU_BACKEND();  // its 80 steps take over the 300 s limit on ref
  TinyRun t;
  // two runs, unfused and fused, with a target, to overlay and compare; logged intervals long
  // enough (10 steps) for the power of each to be defined
  const std::string common =
      "--set model.n_embd=128 --set model.block_size=64 --set train.batch_size=16 "
      "--set train.max_steps=40 --set train.log_interval=10 --set train.eval_interval=10 "
      "--set train.target_loss=2.9 ";
  auto a = t.train("unfused", common);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("report   " + t.d.file("unfused/report.html")), std::string::npos)
      << a.output;
  ASSERT_TRUE(fs::exists(t.d.file("unfused/report.html")));
  // each logged interval holds its power per domain (W), for the stacked power chart
  for (const auto& line : read_jsonl(t.d.file("unfused/metrics.jsonl")))
    if (line.contains("energy_interval_tokens") && line["energy_j"].is_number()) {
      ASSERT_TRUE(line.contains("power_w_by_domain")) << line.dump();
      EXPECT_FALSE(line["power_w_by_domain"].empty()) << line.dump();
    }
  auto b = t.train("fused", common + "--set train.fusion=on");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto r = run_cmd(kBin + " report " + t.d.file("unfused") + " " + t.d.file("fused") + " -o " +
                   t.d.file("both.html"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string html = slurp(t.d.file("both.html"));
  EXPECT_EQ(html.find("http://"), std::string::npos) << "the page must not fetch anything";
  EXPECT_EQ(html.find("https://cdn"), std::string::npos);
  EXPECT_NE(html.find("Chart.js v"), std::string::npos) << "Chart.js is inlined";
  EXPECT_NE(html.find("<code>train.fusion</code>"), std::string::npos)
      << "the configuration difference is listed";
  EXPECT_EQ(html.find("<code>train.seed</code>"), std::string::npos) << "equal keys are not";
  if (read_json(t.d.file("unfused/summary.json")).value("energy_estimated", false)) {
    EXPECT_NE(html.find("ESTIMATED"), std::string::npos);
  }
  if (chromium().empty()) GTEST_SKIP() << "chromium is not installed (Debian package chromium)";
  const auto pc = open_in_chromium(t.d.file("both.html"), "two-runs");
  ASSERT_TRUE(pc.self.is_object()) << "no self-check in the page:\n" << pc.dom.substr(0, 3000);
  EXPECT_TRUE(pc.self["errors"].empty()) << pc.self.dump(2);
  EXPECT_TRUE(pc.self["skipped"].empty()) << pc.self.dump(2);
  // loss x3, power per run x2, J/token, carbon
  ASSERT_EQ(pc.self["charts"].size(), 7u) << pc.self.dump(2);
  for (const auto& c : pc.self["charts"]) {
    EXPECT_GT(c["points"].get<int>(), 0) << c.dump();
    EXPECT_GT(c["painted"].get<int>(), 5000) << "blank canvas: " << c.dump();
  }
}

TEST(Report, SigtermStillWritesTheReport) {
  TinyRun t;
  auto r = run_cmd("timeout --preserve-status -s TERM 3 " + kBin + " train " + t.cfg +
                   " --set train.max_steps=1000000 --set train.eval_interval=0 --out " +
                   t.d.file("run"));
  EXPECT_EQ(r.exit_code, 143) << r.output;
  ASSERT_TRUE(fs::exists(t.d.file("run/report.html"))) << r.output;
  // the row of a stopped run says so, not only its step
  const std::string html = slurp(t.d.file("run/report.html"));
  EXPECT_NE(html.find("stopped by SIGTERM (signal 15) before step 1000000"), std::string::npos)
      << html.substr(html.find("<table>"), 1500);
}

// A resumed run's row shows the whole run (run_totals), not its last session's tokens, seconds
// and joules; J/token and gCO2e made from estimated joules say so, as J and kWh do.
TEST(Report, ResumedRunShowsWholeRunTotalsAndLabelsEstimates) {
  TinyRun t;
  ASSERT_EQ(t.train("run", "--stop-at 3").exit_code, 0);
  auto r = run_cmd(t.bin() + " train --out " + t.d.file("run") + " --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cmd(kBin + " report " + t.d.file("run") + " -o " + t.d.file("rep.html"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream f(t.d.file("rep.html"));
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string html = ss.str();
  const auto row = html.find("whole run: 2 sessions");
  ASSERT_NE(row, std::string::npos) << html.substr(0, 4000);
  const std::string tr = html.substr(row, html.find("</tr>", row) - row);
  EXPECT_NE(tr.find("<td>192</td>"), std::string::npos) << "6 steps x 32 tokens: " << tr;
  const auto s = read_json(t.d.file("run/summary.json"));
  if (s.value("energy_estimated", false) && s["energy_j"].is_number()) {
    size_t n = 0;
    for (size_t p = tr.find("(est.)"); p != std::string::npos; p = tr.find("(est.)", p + 1)) ++n;
    EXPECT_EQ(n, 4u) << "J, kWh, J/token and gCO2e: " << tr;
  }
}

// End to end: a run whose first session had no energy counter (estimated: CPU TDP x
// utilization) and whose second read one (a RAPL psys zone: measured). Its whole-run energy
// and its joules to target are an estimate in part: summary.json says so in run_totals and the
// target, and the report and `greentrain schedule` read the totals as estimated (they read the
// last session's flag, and called them measured).
TEST(Report, ResumedRunWhoseFirstSessionWasEstimatedIsEstimatedWhole) {
  TinyRun t;
  fs::create_directories(t.d.file("no-rapl"));
  energy::test::fake_rapl_zone(t.d.file("rapl"), "intel-rapl:0", "psys", 1000000);
  const std::string env =
      "GT_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "
      "GT_ROCM_SMI_LIBRARY=/nonexistent/librocm_smi64.so GT_DAEMON_SOCKET=" +
      t.d.file("no-daemon.sock") + " GT_POWERCAP_ROOT=";
  // not reached in the first session (its evaluation at step 2), reached at step 3 in the second
  auto r = run_cmd(env + t.d.file("no-rapl") + " " + t.bin() + " train " + t.cfg + " --out " +
                   t.d.file("run") + " --set train.target_loss=0.001 --stop-at 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto first = read_json(t.d.file("run/summary.json"));
  ASSERT_EQ(first["energy_estimated"], true) << first.dump(2);
  EXPECT_EQ(first["run_totals"]["energy_estimated"], true);
  r = run_cmd(env + t.d.file("rapl") + " " + t.bin() + " train --out " + t.d.file("run") +
              " --resume --set train.target_loss=50");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto s = read_json(t.d.file("run/summary.json"));
  ASSERT_EQ(s["energy_estimated"], false) << "the second session measured: " << s.dump(2);
  ASSERT_TRUE(s["run_totals"]["energy_j"].is_number()) << s.dump(2);
  EXPECT_EQ(s["run_totals"]["sessions"], 2);
  EXPECT_EQ(s["run_totals"]["energy_estimated"], true) << s["run_totals"].dump();
  ASSERT_EQ(s["target"]["reached"], true) << s["target"].dump(2);
  EXPECT_EQ(s["target"]["energy_estimated"], true) << "its joules add the first session's";
  // the report: the whole run's figures marked
  r = run_cmd(kBin + " report " + t.d.file("run") + " -o " + t.d.file("rep.html"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string html = slurp(t.d.file("rep.html"));
  const auto row = html.find("whole run: 2 sessions");
  ASSERT_NE(row, std::string::npos) << html.substr(0, 4000);
  const std::string tr = html.substr(row, html.find("</tr>", row) - row);
  size_t n = 0;
  for (size_t p = tr.find("(est.)"); p != std::string::npos; p = tr.find("(est.)", p + 1)) ++n;
  EXPECT_EQ(n, 4u) << "J, kWh, J/token and gCO2e: " << tr;
  EXPECT_NE(html.find("<b>Energy is ESTIMATED</b>"), std::string::npos);
  EXPECT_NE(html.find("(estimated)</b>"), std::string::npos) << "the joules to target";
  // schedule: the power taken from this run is an estimate
  write_file(t.d.file("ci.csv"),
             "Time,Carbon Intensity\n2020-01-01 00:00:00,300\n2020-01-01 01:00:00,100\n"
             "2020-01-01 02:00:00,200\n2020-01-01 03:00:00,400\n");
  write_file(t.d.file("jobs.toml"), "[[job]]\nname = \"a\"\ncommand = \"true\"\nsummary = \"" +
                                        t.d.file("run") +
                                        "\"\nearliest_start = 2020-01-01T00:00:00\n"
                                        "deadline = 2020-01-01T04:00:00\n");
  r = run_cmd(kBin + " schedule " + t.d.file("jobs.toml") + " --carbon-csv " + t.d.file("ci.csv") +
              " --utc-offset 0 --json " + t.d.file("plan.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto plan = read_json(t.d.file("plan.json"));
  EXPECT_EQ(plan["jobs"][0]["estimated"], true) << plan.dump(2);
  EXPECT_NE(plan["jobs"][0]
                .value("estimated_reason", std::string())
                .find("estimated in an earlier session of the run"),
            std::string::npos)
      << plan.dump(2);
}

// The (est.) marks of a resumed run's whole-run figures followed its last session's
// energy_estimated: a run whose first session was estimated and second measured showed its
// totals as measured. run_totals.energy_estimated (any session's) marks them now, and a
// summary written before that key falls back to the session's flag.
TEST(Report, WholeRunFiguresAreEstimatedWhenAnEarlierSessionWas) {
  TempDir d;
  fs::create_directories(d.file("run"));
  write_file(d.file("run/metrics.jsonl"), "{\"step\": 1, \"loss\": 5.0}\n");
  write_file(d.file("run/config.toml"), "a = 1\n");
  auto html_of = [&](const std::string& totals_flag, bool session_estimated) {
    write_file(d.file("run/summary.json"),
               R"({"step": 6, "tokens": 96, "duration_s": 1.0, "energy_j": 10.0,
                   "g_co2e": 0.001, "energy_unknown": false, "energy_estimated": )" +
                   std::string(session_estimated ? "true" : "false") +
                   R"(, "energy_method": "RAPL counters",
                   "run_totals": {"sessions": 2, "first_step": 0, "tokens": 192,
                                  "duration_s": 2.0, "wall_s": 3.0, "energy_j": 30.0,
                                  "g_co2e": 0.003)" +
                   totals_flag + "}}");
    const report::RunData r = report::read_run(d.file("run"));
    EXPECT_TRUE(r.problems.empty()) << r.problems[0];
    return std::make_pair(report::render_html({r}, nullptr, ""), report::run_series(r));
  };
  auto est_marks = [](const std::string& html) {
    const auto row = html.find("whole run: 2 sessions");
    EXPECT_NE(row, std::string::npos) << html.substr(0, 4000);
    if (row == std::string::npos) return size_t(0);
    const std::string tr = html.substr(row, html.find("</tr>", row) - row);
    size_t n = 0;
    for (size_t p = tr.find("(est.)"); p != std::string::npos; p = tr.find("(est.)", p + 1)) ++n;
    return n;
  };
  // first session estimated, second (the last) measured
  auto [html, series] = html_of(R"(, "energy_estimated": true)", false);
  EXPECT_EQ(est_marks(html), 4u) << "J, kWh, J/token and gCO2e of the whole run";
  EXPECT_NE(html.find("<b>Energy is ESTIMATED</b>"), std::string::npos);
  EXPECT_NE(html.find("in an earlier session; the last session's was measured"), std::string::npos);
  EXPECT_NE(html.find("last session: RAPL counters"), std::string::npos);
  EXPECT_EQ(series["estimated"], true) << "the charts span every session";
  // every session measured
  std::tie(html, series) = html_of(R"(, "energy_estimated": false)", false);
  EXPECT_EQ(est_marks(html), 0u);
  EXPECT_EQ(html.find("<b>Energy is ESTIMATED</b>"), std::string::npos);
  EXPECT_EQ(series["estimated"], false);
  // written before run_totals.energy_estimated: the session's flag, as before
  std::tie(html, series) = html_of("", true);
  EXPECT_EQ(est_marks(html), 4u);
  EXPECT_EQ(html.find("in an earlier session"), std::string::npos);
  std::tie(html, series) = html_of("", false);
  EXPECT_EQ(est_marks(html), 0u);
}

// A run whose carbon series did not cover its time (or had a hole in it) shows it: the flags
// of summary.json's energy that begin "carbon:" under the runs table, the gCO2e cell marked; a
// run without them shows neither, and other flags are not carbon's.
TEST(Report, CarbonFlagsOfTheSummaryAreShown) {
  TempDir d;
  fs::create_directories(d.file("run"));
  write_file(d.file("run/metrics.jsonl"), "{\"step\": 1, \"loss\": 5.0}\n");
  write_file(d.file("run/config.toml"), "a = 1\n");
  const std::string flag =
      "carbon: the measured interval 2026-12-07T19:00:00Z .. 2026-12-07T19:01:00Z lies outside "
      "the intensity series old.csv, whose rows run from 2020-01-01T00:00:00Z to its last row at "
      "2020-01-01T01:00:00Z (step 1 h: it covers up to 2020-01-01T02:00:00Z); after "
      "2020-01-01T02:00:00Z its last value, 200 gCO2e/kWh, was used (1 min)";
  auto html_of = [&](const std::string& flags) {
    write_file(d.file("run/summary.json"),
               R"({"step": 6, "tokens": 96, "duration_s": 1.0, "energy_j": 10.0,
                   "g_co2e": 0.001, "energy_unknown": false, "energy_estimated": false,
                   "energy": {"flags": [)" +
                   flags + "]}}");
    const report::RunData r = report::read_run(d.file("run"));
    EXPECT_TRUE(r.problems.empty()) << r.problems[0];
    return report::render_html({r}, nullptr, "");
  };
  const std::string html = html_of("\"" + flag + "\", \"rapl: a counter wrapped\"");
  EXPECT_NE(html.find("id=gt-carbon-flags"), std::string::npos);
  EXPECT_NE(html.find("<li><b>run</b>: " + flag + "</li>"), std::string::npos) << html;
  EXPECT_EQ(html.find("rapl: a counter wrapped"), std::string::npos);
  EXPECT_NE(html.find("carbon held: see below"), std::string::npos);
  const std::string clean = html_of("\"rapl: a counter wrapped\"");
  EXPECT_EQ(clean.find("id=gt-carbon-flags"), std::string::npos);
  EXPECT_EQ(clean.find("carbon held"), std::string::npos);
}

TEST(Report, MissingOrTruncatedMetricsAreNamed) {
  TinyRun t;
  ASSERT_EQ(t.train("run").exit_code, 0);
  // truncated: the last line cut in the middle, as a crash while writing leaves it
  std::string m = slurp(t.d.file("run/metrics.jsonl"));
  write_file(t.d.file("run/metrics.jsonl"), m.substr(0, m.size() - 30));
  auto r = run_cmd(kBin + " report " + t.d.file("run") + " -o " + t.d.file("cut.html"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string html = slurp(t.d.file("cut.html"));
  EXPECT_NE(html.find("metrics.jsonl: 1 of its 6 lines could not be read (the first is line 6"),
            std::string::npos)
      << r.output;
  // missing metrics and summary
  fs::remove(t.d.file("run/metrics.jsonl"));
  fs::remove(t.d.file("run/summary.json"));
  r = run_cmd(kBin + " report " + t.d.file("run") + " -o " + t.d.file("missing.html"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  html = slurp(t.d.file("missing.html"));
  EXPECT_NE(html.find("metrics.jsonl is missing"), std::string::npos);
  EXPECT_NE(html.find("summary.json is missing"), std::string::npos);
  EXPECT_NE(r.output.find("metrics.jsonl is missing"), std::string::npos) << r.output;
  if (chromium().empty()) GTEST_SKIP() << "chromium is not installed (Debian package chromium)";
  const auto pc = open_in_chromium(t.d.file("missing.html"), "missing-metrics");
  ASSERT_TRUE(pc.self.is_object()) << pc.dom.substr(0, 3000);
  EXPECT_TRUE(pc.self["errors"].empty()) << pc.self.dump(2);
  EXPECT_TRUE(pc.self["charts"].empty()) << "nothing to draw: " << pc.self.dump(2);
  EXPECT_FALSE(pc.self["skipped"].empty());
  EXPECT_NE(pc.dom.find("no data"), std::string::npos) << "each empty chart says so";
}

// summary.json and metrics.jsonl lines with keys of other types than train writes (hand-edited,
// or another tool's): the page is still drawn, the keys are shown as unknown and named in the
// problems; nlohmann's type_error never escapes (bench/fuzz.sh found "energy_estimated": "x").
TEST(Report, SummaryWithWrongTypesIsNamedAndTheRestShown) {
  TempDir d;
  fs::create_directories(d.file("run"));
  write_file(d.file("run/metrics.jsonl"),
             "{\"step\": 1, \"loss\": 5.0}\n{\"step\": 2, \"energy_estimated\": \"x\"}\n");
  write_file(d.file("run/config.toml"), "a = 1\n");
  const std::string summaries[] = {
      R"({"energy_estimated": "x", "energy_unknown_reason": 3, "tokens": 640,
          "target": {"reached": "yes", "energy_j": 1.0}})",
      R"({"tokens": 640, "target": [1]})",
      R"({"tokens": 640, "target": {"reached": true, "reason": 1}})", R"([1, 2])"};
  for (const auto& text : summaries) {
    write_file(d.file("run/summary.json"), text);
    const report::RunData r = report::read_run(d.file("run"));
    std::string problems;
    for (const auto& p : r.problems) problems += p + "\n";
    std::string html;
    ASSERT_NO_THROW(html = report::render_html({r}, nullptr, "")) << text;
    EXPECT_NE(problems.find("metrics.jsonl: 1 of its 2 lines"), std::string::npos) << problems;
    EXPECT_NE(problems.find("summary.json"), std::string::npos) << text << "\n" << problems;
    if (text[0] == '{') {
      EXPECT_NE(html.find("<td>640</td>"), std::string::npos) << "the readable totals are shown";
    }
  }
  const report::RunData r = report::read_run(d.file("run"));
  EXPECT_FALSE(r.summary) << "an array is not a summary";
}

TEST(Report, TextFromTheRunCannotEndTheDataScript) {
  report::RunData run;
  run.name = "r";
  report::AblationData abl;
  abl.table = {{"config", "x</script><script>alert(1)</script>"},
               {"rows", nlohmann::json::array()}};
  const std::string html = report::render_html({run}, &abl, "");
  EXPECT_EQ(html.find("</script><script>alert(1)"), std::string::npos);
  EXPECT_NE(html.find("x\\u003c/script\\u003e"), std::string::npos) << "escaped inside the JSON";
  EXPECT_THROW(report::render_html({run}, nullptr, "var a = '</SCRIPT>';"), Error);
}

// Issue 31 §6: a run folder named "<!--<script>" put HTML's script parser in its double-escaped
// state, so the data element swallowed the page's scripts: no chart, no notice. No '<' is left
// in the inlined JSON, and a page whose script does not run says so.
TEST(Report, RunFolderNamedLikeMarkupStillDrawsItsCharts) {
  TinyRun t;
  const std::string run = t.d.file("<!--<script>");
  auto a = run_cmd(t.bin() + " train " + t.cfg + " --out '" + run + "'");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto r = run_cmd(kBin + " report '" + run + "' -o " + t.d.file("r.html"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string html = slurp(t.d.file("r.html"));
  const size_t data = html.find("id=gt-data>");
  ASSERT_NE(data, std::string::npos);
  const std::string json = html.substr(data + 11, html.find("</script>", data) - data - 11);
  EXPECT_EQ(json.find('<'), std::string::npos) << "a '<' left in the inlined JSON";
  EXPECT_NE(json.find("\\u003c!--\\u003cscript\\u003e"), std::string::npos);
  EXPECT_NE(html.find("id=gt-script-failed"), std::string::npos) << "no notice for a failed script";
  if (chromium().empty()) GTEST_SKIP() << "chromium is not installed (Debian package chromium)";
  const auto pc = open_in_chromium(t.d.file("r.html"), "markup-named-run");
  ASSERT_TRUE(pc.self.is_object()) << "the page's script did not run:\n" << pc.dom.substr(0, 3000);
  EXPECT_TRUE(pc.self["errors"].empty()) << pc.self.dump(2);
  EXPECT_FALSE(pc.self["charts"].empty()) << pc.self.dump(2);
  EXPECT_NE(pc.dom.find("id=\"gt-script-failed\" hidden"), std::string::npos)
      << "the notice stays on a page that drew its charts";
}

TEST(Report, NoRunFolderIsAnError) {
  TempDir d;
  auto r = run_cmd(kBin + " report " + d.file("nope"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("nope: no such run folder"), std::string::npos) << r.output;
  // a folder that holds no run's files (a typo, /tmp): an error, not an empty report
  fs::create_directories(d.file("empty"));
  r = run_cmd(kBin + " report " + d.file("empty") + " -o " + d.file("empty.html"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("empty: not a run folder: it holds none of metrics.jsonl, summary.json, "
                          "config.toml or ablation.json"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(d.file("empty.html")));
}

}  // namespace
}  // namespace gt
