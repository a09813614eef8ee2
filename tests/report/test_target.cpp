// Energy to a target validation loss (train.target_loss, train.stop_at_target): summary.json
// records step, tokens, seconds, joules and gCO2e when it is first reached, and says why when
// it is not (null, never 0 or the total).
#include <gtest/gtest.h>

#include <sstream>

#include "report_test_util.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using namespace test;

TEST(Target, ReachedIsRecordedAndStopAtTargetEndsTheRunWithACheckpoint) {
  TinyRun t;
  // a char-level model starts near ln(vocab) ~ 3; 50 is reached at the first validation (step 3)
  auto r = t.train("run", "--set train.target_loss=50 --set train.stop_at_target=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("TARGET 50 reached"), std::string::npos) << r.output;
  const auto s = read_json(t.d.file("run/summary.json"));
  EXPECT_EQ(s["step"], 3) << "stop_at_target should end the run at the first validation";
  ASSERT_TRUE(s.contains("target")) << s.dump(2);
  const auto& tg = s["target"];
  EXPECT_EQ(tg["reached"], true);
  EXPECT_EQ(tg["step"], 3);
  EXPECT_EQ(tg["tokens"], 3 * 4 * 8);
  EXPECT_GT(tg["seconds"].get<double>(), 0);
  EXPECT_LE(tg["seconds"].get<double>(), s["duration_s"].get<double>() + 60);
  EXPECT_EQ(tg["stopped_at_target"], true);
  EXPECT_LE(tg["val_loss"].get<double>(), 50);
  // energy: a number (<= the whole run's) or null with the reason, never a silent 0
  if (tg["energy_j"].is_number()) {
    EXPECT_GT(tg["energy_j"].get<double>(), 0);
    EXPECT_LE(tg["energy_j"].get<double>(), s["energy_j"].get<double>());
    EXPECT_TRUE(tg["g_co2e"].is_number());
  } else {
    EXPECT_TRUE(tg["energy_j"].is_null());
    EXPECT_FALSE(tg.value("energy_unknown_reason", std::string()).empty()) << tg.dump(2);
  }
  EXPECT_TRUE(fs::exists(t.d.file("run/checkpoint/state.json")));
  // the metrics line of the step marks it
  const auto lines = read_jsonl(t.d.file("run/metrics.jsonl"));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(lines[2].contains("target_reached")) << lines[2].dump();
  EXPECT_FALSE(lines[1].contains("target_reached"));
}

TEST(Target, WithoutStopTheRunGoesOnAndKeepsTheFirstStep) {
  TinyRun t;
  auto r = t.train("run", "--set train.target_loss=50");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto s = read_json(t.d.file("run/summary.json"));
  EXPECT_EQ(s["step"], 6);
  EXPECT_EQ(s["target"]["step"], 3) << "the first step that reached it, not the last";
  EXPECT_EQ(s["target"]["stopped_at_target"], false);
}

TEST(Target, NeverReachedIsNullWithTheReason) {
  TinyRun t;
  auto r = t.train("run", "--set train.target_loss=0.001");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("target validation loss 0.001 not reached"), std::string::npos)
      << r.output;
  const auto tg = read_json(t.d.file("run/summary.json"))["target"];
  EXPECT_EQ(tg["reached"], false);
  for (const char* k : {"step", "tokens", "seconds", "energy_j", "g_co2e"})
    EXPECT_TRUE(tg[k].is_null()) << k << " should be null: " << tg.dump(2);
  const std::string why = tg.value("reason", std::string());
  EXPECT_NE(why.find("never reached 0.001"), std::string::npos) << why;
  EXPECT_NE(why.find("best"), std::string::npos) << why;
}

TEST(Target, AResumedRunKeepsTheFirstSessionsRecord) {
  TinyRun t;
  // the evaluation at --stop-at 2 reaches it in the first session
  auto r = t.train("run", "--set train.target_loss=50 --stop-at 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto first = read_json(t.d.file("run/summary.json"))["target"];
  ASSERT_EQ(first["step"], 2) << first.dump(2);
  r = run_cmd(t.bin() + " train --out " + t.d.file("run") + " --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto s = read_json(t.d.file("run/summary.json"));
  EXPECT_EQ(s["step"], 6);
  EXPECT_EQ(s["target"], first) << "reached in session 1: that record stands";
}

// Reached in the second session: the seconds are wall time on one basis, the first session's
// whole wall_s plus this session's up to the evaluation (once its steps-only duration_s).
TEST(Target, ReachedAfterResumingCountsTheEarlierSessionsWallTime) {
  TinyRun t;
  // a long evaluation: the first session's wall time is well above its steps' time
  auto r = t.train("run", "--set train.target_loss=0.001 --set train.eval_steps=3000 --stop-at 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto first = read_json(t.d.file("run/summary.json"));
  ASSERT_EQ(first["target"]["reached"], false);
  const double first_wall = first["wall_s"].get<double>();
  ASSERT_GT(first_wall, 3 * first["duration_s"].get<double>()) << first.dump(2);
  r = run_cmd(t.bin() + " train --out " + t.d.file("run") +
              " --resume --set train.target_loss=50 --set train.eval_steps=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto s = read_json(t.d.file("run/summary.json"));
  const auto& tg = s["target"];
  ASSERT_EQ(tg["reached"], true) << tg.dump(2);
  EXPECT_EQ(tg["step"], 3);
  ASSERT_TRUE(tg["seconds"].is_number()) << tg.dump(2);
  EXPECT_GT(tg["seconds"].get<double>(), first_wall) << "the first session counts whole";
  EXPECT_LE(tg["seconds"].get<double>(), s["run_totals"]["wall_s"].get<double>());
  EXPECT_NE(tg.value("seconds_basis", std::string()).find("wall time"), std::string::npos);
}

// Resuming with train.max_steps below the checkpoint's step trained nothing, exited 0 and
// overwrote summary.json with zeros: now an error naming both, and nothing is written; at the
// checkpoint's step, nothing to train and the results kept.
TEST(Resume, MaxStepsBelowTheCheckpointIsRefusedAndNothingIsOverwritten) {
  TinyRun t;
  auto r = t.train("run");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string summary = t.d.file("run/summary.json"), report = t.d.file("run/report.html");
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  const std::string before = slurp(summary), report_before = slurp(report);
  const std::string metrics_before = slurp(t.d.file("run/metrics.jsonl"));
  r = run_cmd(t.bin() + " train --out " + t.d.file("run") + " --resume --set train.max_steps=4");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("train.max_steps = 4 is below the checkpoint's step 6"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(slurp(summary), before);
  EXPECT_EQ(slurp(report), report_before);
  EXPECT_EQ(slurp(t.d.file("run/metrics.jsonl")), metrics_before);
  r = run_cmd(t.bin() + " train --out " + t.d.file("run") + " --resume");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nothing to train"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(summary), before);
  EXPECT_EQ(slurp(report), report_before);
}

// A session in which no step ran (stopped at once): its speed and efficiency are unknown with
// the reason, not 0.0; a CPU run's GPU figures are null with the reason too.
TEST(Resume, NoStepRanMeansUnknownSpeedNotZero) {
  TinyRun t;
  auto r = t.train("run", "--stop-at 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // --stop-at at the checkpoint's step: the session runs and trains nothing
  r = run_cmd(t.bin() + " train --out " + t.d.file("run") + " --resume --stop-at 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto s = read_json(t.d.file("run/summary.json"));
  EXPECT_TRUE(s["tokens_per_s"].is_null()) << s["tokens_per_s"];
  EXPECT_EQ(s.value("tokens_per_s_unknown_reason", std::string()), "no step ran in this session");
  EXPECT_TRUE(s["gflops_per_watt"].is_null()) << s["gflops_per_watt"];
  EXPECT_TRUE(s["tokens_per_joule"].is_null()) << s["tokens_per_joule"];
  if (s["energy_j"].is_number()) {
    EXPECT_FALSE(s.value("efficiency_unknown_reason", std::string()).empty()) << s.dump(2);
  }
  EXPECT_TRUE(s["gpu_energy_j"].is_null());
  EXPECT_FALSE(s.value("gpu_energy_unknown_reason", std::string()).empty()) << s.dump(2);
  for (const auto& line : read_jsonl(t.d.file("run/metrics.jsonl")))
    if (line.contains("gpu_energy_j")) {
      EXPECT_TRUE(line["gpu_energy_j"].is_null());
      EXPECT_FALSE(line.value("gpu_energy_unknown_reason", std::string()).empty()) << line;
    }
}

TEST(Target, NoTargetNoTargetField) {
  TinyRun t;
  ASSERT_EQ(t.train("run").exit_code, 0);
  EXPECT_FALSE(read_json(t.d.file("run/summary.json")).contains("target"));
}

TEST(Target, BadValuesAreNamed) {
  TinyRun t;
  auto r = t.train("run", "--set train.stop_at_target=yes");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("'yes' is not true or false"), std::string::npos) << r.output;
  r = t.train("run2", "--set train.stop_at_target=true");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("needs train.target_loss"), std::string::npos) << r.output;
  // a TOML boolean in the file is read as one (and written back into the run's config.toml)
  std::string toml = tiny_toml(t.d.file("t.txt"));
  toml.replace(toml.find("[train]\n"), 8, "[train]\ntarget_loss = 50.0\nstop_at_target = true\n");
  write_file(t.d.file("b.toml"), toml);
  r = run_cmd(kBin + " train " + t.d.file("b.toml") + " --out " + t.d.file("run3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream f(t.d.file("run3/config.toml"));
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find("stop_at_target = true"), std::string::npos) << ss.str();
}

}  // namespace
}  // namespace gt
