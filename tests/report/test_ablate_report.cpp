// `greentrain ablate` with train.target_loss: rows ranked by joules to the target, and the
// ablate folder's report.html with its table and the measured-vs-claimed bar chart.
#include <gtest/gtest.h>

#include <sstream>

#include "chromium_util.h"
#include "core/error.h"
#include "report/report.h"
#include "report_test_util.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using namespace test;

std::string ablate_cmd(const TinyRun& t, const std::string& out, const std::string& extra) {
  return t.bin() + " ablate " + t.cfg + " --steps 4 --order fusion --out " + t.d.file(out) +
         " --set train.eval_interval=2 " + extra;
}

TEST(AblateTarget, RowsAreRankedByJoulesToTargetAndTheFolderGetsAReport) {
  TinyRun t;
  auto r = run_cmd(ablate_cmd(t, "abl", "--set train.target_loss=50"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ranked by joules to validation loss 50"), std::string::npos) << r.output;
  const auto j = read_json(t.d.file("abl/ablation.json"));
  EXPECT_EQ(j["target_loss"], 50.0);
  ASSERT_EQ(j["ranking_by_joules_to_target"].size(), 2u) << j.dump(2);
  // the ranking follows the rows' joules to target, fewest first
  std::map<std::string, double> joules;
  for (const auto& row : j["rows"])
    if (row.contains("target")) {
      EXPECT_EQ(row["target"]["reached"], true) << row.dump(2);
      EXPECT_EQ(row["target"]["step"], 2) << "reached at the first validation";
      if (row["joules_to_target"].is_number()) joules[row["row"]] = row["joules_to_target"];
    }
  if (joules.size() == 2) {
    const auto& rank = j["ranking_by_joules_to_target"];
    EXPECT_LE(joules[rank[0]], joules[rank[1]]) << j.dump(2);
  }
  ASSERT_TRUE(fs::exists(t.d.file("abl/report.html"))) << r.output;
  std::ifstream f(t.d.file("abl/report.html"));
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find("<h2>Ablation</h2>"), std::string::npos);
  EXPECT_NE(ss.str().find("claimed (cumulative)"), std::string::npos);
  if (chromium().empty()) GTEST_SKIP() << "chromium is not installed (Debian package chromium)";
  const auto pc = open_in_chromium(t.d.file("abl/report.html"), "ablate");
  ASSERT_TRUE(pc.self.is_object()) << pc.dom.substr(0, 3000);
  EXPECT_TRUE(pc.self["errors"].empty()) << pc.self.dump(2);
  bool bars = false;
  for (const auto& c : pc.self["charts"])
    if (c["id"] == "ablation") bars = c["points"].get<int>() > 0 && c["painted"].get<int>() > 5000;
  EXPECT_TRUE(bars) << "the measured-vs-claimed bar chart: " << pc.self.dump(2);
}

TEST(AblateTarget, RowsThatNeverReachItAreListedLastWithTheReason) {
  TinyRun t;
  auto r = run_cmd(ablate_cmd(t, "abl", "--set train.target_loss=0.001"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("not reached: the validation loss never reached 0.001"),
            std::string::npos)
      << r.output;
  const auto j = read_json(t.d.file("abl/ablation.json"));
  int with_target = 0;
  for (const auto& row : j["rows"]) {
    if (!row.contains("target")) continue;
    ++with_target;
    EXPECT_EQ(row["target"]["reached"], false) << row.dump(2);
    EXPECT_TRUE(row["joules_to_target"].is_null()) << row.dump(2);
  }
  EXPECT_EQ(with_target, 2) << j.dump(2);
}

// An ablation.json whose keys have other types than `ablate` writes (hand-edited, damaged: found
// by fuzz/fuzz_run_folder) is refused with the file and the key named. The report used to stop
// with the JSON library's "type must be string, but is number", naming nothing.
TEST(AblateReport, AblationJsonWithWrongTypesIsRefusedNamingTheKey) {
  TempDir d;
  const std::string dir = d.file("abl");
  fs::create_directories(dir);
  const std::pair<const char*, const char*> cases[] = {
      {"[]", "the file"},
      {R"({"steps": "x"})", "steps"},
      {R"({"steps": 1e300})", "steps"},
      {R"({"config": 1})", "config"},
      {R"({"energy_estimated": "yes"})", "energy_estimated"},
      {R"({"rows": {}})", "rows"},
      {R"({"rows": [1]})", "rows[0]"},
      {R"({"rows": [{"row": 1}]})", "rows[0].row"},
      {R"({"rows": [{"measured": false, "reason": []}]})", "rows[0].reason"},
      {R"({"rows": [{"target": {"reached": 1}}]})", "rows[0].target.reached"},
      {R"({"rows": [{"energy_basis": 1}]})", "rows[0].energy_basis"},
  };
  for (const auto& [text, key] : cases) {
    write_file(dir + "/ablation.json", text);
    try {
      std::vector<report::RunData> rows;
      const auto a = report::read_ablation(dir, rows);
      (void)report::render_html(rows, &a, "");
      ADD_FAILURE() << text << ": accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("ablation.json: " + std::string(key)), std::string::npos)
          << text << ": " << m;
    } catch (const std::exception& e) {
      ADD_FAILURE() << text << ": not a gt::Error: " << e.what();
    }
  }
  // what `ablate` writes, a configuration path in either form, is read
  write_file(dir + "/ablation.json",
             R"({"steps": 3, "config": {"bytes_hex": "632de92e746f6d6c", "shown": "c-\\xe9.toml"},)"
             R"( "energy_estimated": true, "rows": [{"row": "baseline", "measured": true}]})");
  std::vector<report::RunData> rows;
  const auto a = report::read_ablation(dir, rows);
  EXPECT_NE(report::render_html(rows, &a, "").find("c-\\xe9.toml"), std::string::npos);
}

// The Runs table and the Ablation table gave the same row two tokens/s and two J/token (all
// steps and the whole run's energy there; the median step and the logged training intervals
// here) with no word of either basis. Each column names its basis, a note says why they differ,
// and a row on the whole run's energy (its intervals' unknown) says so in its J/token cell.
TEST(AblateReport, RunsAndAblationTablesNameTheBasisOfTheirFigures) {
  report::RunData run;
  run.dir = run.name = "0_baseline";
  run::Summary s;
  s.step = 4;
  s.tokens = 1000;
  s.duration_s = 2;
  s.energy_j = 10;
  s.tokens_per_s = 500;
  s.joules_per_token = 0.01;
  run.summary = s;
  report::AblationData a;
  const std::string whole =
      "whole run incl. final validation (the logged intervals' energy was "
      "unknown)";
  a.table = {{"steps", 4},
             {"rows",
              {{{"row", "baseline"},
                {"measured", true},
                {"tokens_per_s", 600},
                {"joules_per_token", 0.008},
                {"energy_basis", "training intervals"}},
               {{"row", "+bf16"},
                {"measured", true},
                {"tokens_per_s", 900},
                {"joules_per_token", 0.006},
                {"energy_basis", whole}}}}};
  const std::string h = report::render_html({run}, &a, "");
  const std::size_t runs = h.find("<h2>Runs</h2>"), abl = h.find("<h2>Ablation</h2>");
  ASSERT_NE(runs, std::string::npos);
  ASSERT_NE(abl, std::string::npos);
  const std::string runs_table = h.substr(runs, abl - runs), abl_table = h.substr(abl);
  EXPECT_NE(runs_table.find("tokens/s<br><small>tokens / training s, all steps</small>"),
            std::string::npos)
      << runs_table;
  EXPECT_NE(runs_table.find("J/token<br><small>whole run's J (evaluations, checkpoints "
                            "included) / tokens</small>"),
            std::string::npos)
      << runs_table;
  EXPECT_NE(abl_table.find("tokens/s<br><small>median step, without each segment's first"),
            std::string::npos)
      << abl_table;
  EXPECT_NE(abl_table.find("J/token<br><small>logged training intervals"), std::string::npos)
      << abl_table;
  EXPECT_NE(abl_table.find("differ between the two tables by these bases"), std::string::npos);
  EXPECT_NE(abl_table.find("0.006<br><small>whole run incl. final validation"), std::string::npos)
      << abl_table;
  EXPECT_EQ(abl_table.find("0.008<br>"), std::string::npos) << abl_table;
}

}  // namespace
}  // namespace gt
