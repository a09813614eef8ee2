// What a resumed run says about the sessions before it: a session killed without its
// summary.json (SIGKILL, out of memory, node lost) leaves the run's time, energy and carbon
// unknown (null with the reason, in summary.json, on the console and in the report), never a
// partial sum; tokens stay known from the checkpoint's "run" record. Also: one figure for the
// time to a target, val_loss null with its reason, the note on a CONFIG that a resume does not
// read, and the learning-rate schedule kept when a resume raises train.max_steps.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "report_test_util.h"

namespace gt {
namespace {

namespace fs = std::filesystem;
using namespace test;

constexpr int64_t kTokensPerStep = 4 * 8;  // tiny_toml: batch_size 4 x block_size 8

const char* const kSummed[] = {"duration_s", "wall_s", "energy_j", "g_co2e"};

// Starts `greentrain ARGS` in the background, waits until `ready` (a shell test) holds, then
// sends it `signal` and waits for it to end. Returns the command's output.
CmdResult run_until(const std::string& args, const std::string& ready, const std::string& signal,
                    const std::string& log) {
  const std::string script = fmt::format(
      "{} > {} 2>&1 & pid=$!; for i in $(seq 1 600); do if {}; then break; fi; sleep 0.05; "
      "done; kill -{} $pid; wait $pid; cat {}",
      args, log, ready, signal, log);
  return run_cmd("bash -c '" + script + "'");
}

// A shell test for run_until: RUN's checkpoint is of step `step` (1 to 9) or later.
std::string checkpoint_of_step(const std::string& run, int step) {
  return fmt::format(
      "grep -qE \"^  \\\"step\\\": ([{}-9]|[1-9][0-9]+),\" {}/checkpoint/state.json 2>/dev/null",
      step, run);
}

// A shell test for run_until: RUN's metrics.jsonl has a line of step `step`.
std::string logged_step(const std::string& run, int step) {
  return fmt::format("grep -q \"\\\"step\\\":{}\" {}/metrics.jsonl 2>/dev/null", step, run);
}

// Trains t's run "run" with train.max_steps raised to 100000 (from tiny.toml, or --resume of
// the run there) and SIGKILLs it once the shell test `ready` holds, `extra` added to the command
// line. Returns the run folder.
std::string killed_run(const TinyRun& t, bool resume, const std::string& ready,
                       const std::string& extra = "") {
  const std::string run = t.d.file("run");
  run_until(t.bin() + " train " + (resume ? "" : t.cfg + " ") + "--out " + run +
                (resume ? " --resume" : "") + " --set train.max_steps=100000" + extra,
            ready, "KILL", t.d.file("kill.log"));
  return run;
}

// A real SIGKILL after a checkpoint: the resumed run's totals are unknown, with the session
// that was lost named; tokens are counted from the checkpoint's record of the run.
TEST(ResumeTotals, ASessionKilledAfterACheckpointMakesTheRunsEnergyUnknown) {
  TinyRun t;
  // many steps, a checkpoint every 2: killed once the checkpoint of step 4 (or later) is there
  const std::string run = killed_run(t, false, checkpoint_of_step(t.d.file("run"), 4),
                                     " --set train.checkpoint_interval=2");
  ASSERT_TRUE(fs::exists(run + "/session_open.json")) << "the killed session left no record";
  ASSERT_FALSE(fs::exists(run + "/summary.json"));
  // (killed between save_checkpoint's two renames: the previous checkpoint, kept as .old)
  const std::string ck_dir =
      fs::exists(run + "/checkpoint/state.json") ? "/checkpoint" : "/checkpoint.old";
  const auto state = read_json(run + ck_dir + "/state.json");
  const int64_t ck = state["step"].get<int64_t>();
  ASSERT_GE(ck, ck_dir == "/checkpoint" ? 4 : 2);
  // the checkpoint records the run up to its step
  EXPECT_EQ(state["run"]["session"], 1) << state["run"];
  EXPECT_EQ(state["run"]["first_step"], 0);
  EXPECT_EQ(state["run"]["tokens"].get<int64_t>(), ck * kTokensPerStep);

  auto r =
      run_cmd(t.bin() + " train --out " + run + " --resume --stop-at " + std::to_string(ck + 2));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("note: the run's totals: session 1 (from step 0) ended without writing "
                          "summary.json"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("time, energy and carbon unknown"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(run + "/session_open.json")) << "the finished session is still open";
  auto s = read_json(run + "/summary.json");
  const nlohmann::json tot = s["run_totals"];  // a copy: s is read again below
  EXPECT_EQ(tot["sessions"], 2) << tot.dump(2);
  EXPECT_EQ(tot["first_step"], 0);
  EXPECT_EQ(tot["tokens"].get<int64_t>(), (ck + 2) * kTokensPerStep) << "the steps before "
                                                                        "the checkpoint count";
  for (const char* k : kSummed) EXPECT_TRUE(tot[k].is_null()) << k << ": " << tot.dump(2);
  EXPECT_NE(tot.value("unknown_reason", std::string()).find("session 1 (from step 0)"),
            std::string::npos)
      << tot.dump(2);
  // the session's own figures stay known
  EXPECT_TRUE(s["wall_s"].is_number());
  // the report says why the whole run's figures are unknown
  std::stringstream html;
  html << std::ifstream(run + "/report.html").rdbuf();
  EXPECT_NE(html.str().find("time, energy and carbon unknown: session 1 (from step 0)"),
            std::string::npos);

  // a later session carries the unknown and its reason on
  r = run_cmd(t.bin() + " train --out " + run + " --resume --stop-at " + std::to_string(ck + 3));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  s = read_json(run + "/summary.json");
  EXPECT_EQ(s["run_totals"]["sessions"], 3);
  EXPECT_EQ(s["run_totals"]["tokens"].get<int64_t>(), (ck + 3) * kTokensPerStep);
  EXPECT_TRUE(s["run_totals"]["energy_j"].is_null());
  EXPECT_EQ(s["run_totals"]["unknown_reason"], tot["unknown_reason"]);
}

// Killed before its first checkpoint: the resume continues from the checkpoint and
// summary.json of the session before, which match, and still knows that a session was lost
// (session_open.json).
TEST(ResumeTotals, ASessionKilledBeforeItsFirstCheckpointIsNotLostSilently) {
  TinyRun t;
  const std::string run = t.d.file("run");
  auto r = t.train("run", "--stop-at 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_FALSE(fs::exists(run + "/session_open.json"));
  // session 2: no checkpoint before it is killed, once it has logged a step past 2
  killed_run(t, true, logged_step(run, 4));
  ASSERT_TRUE(fs::exists(run + "/session_open.json"));
  r = run_cmd(t.bin() + " train --out " + run + " --resume --stop-at 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto tot = read_json(run + "/summary.json")["run_totals"];
  EXPECT_EQ(tot["sessions"], 3) << tot.dump(2);
  EXPECT_EQ(tot["tokens"].get<int64_t>(), 4 * kTokensPerStep);
  for (const char* k : kSummed) EXPECT_TRUE(tot[k].is_null()) << k << ": " << tot.dump(2);
  EXPECT_NE(tot.value("unknown_reason", std::string())
                .find("session 2 (from step 2) ended "
                      "without writing summary.json"),
            std::string::npos)
      << tot.dump(2);
}

// The time to the target is one figure: the progress line's and summary.json's target.seconds,
// the run's wall time (the earlier sessions' whole, loading included).
TEST(Target, TheProgressLineAndTheSummaryGiveOneTimeToTarget) {
  TinyRun t;
  // a long evaluation in session 1: its wall time is well above what session 2's loop takes
  auto r = t.train("run", "--set train.target_loss=0.001 --set train.eval_steps=3000 --stop-at 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cmd(t.bin() + " train --out " + t.d.file("run") +
              " --resume --set train.target_loss=50 --set train.eval_steps=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("TARGET 50 reached \\(([0-9.]+) s")))
      << r.output;
  const auto tg = read_json(t.d.file("run/summary.json"))["target"];
  ASSERT_TRUE(tg["seconds"].is_number()) << tg.dump(2);
  EXPECT_EQ(m[1].str(), fmt::format("{:.1f}", tg["seconds"].get<double>())) << r.output;
}

// No evaluation in the session: val_loss is null with the reason (it was absent when a signal
// came first, and null without a reason at train.max_steps = 0).
TEST(Summary, ValLossIsNullWithTheReasonWhenNoEvaluationRan) {
  TinyRun t;
  const std::string run = t.d.file("run");
  run_until(t.bin() + " train " + t.cfg + " --out " + run +
                " --set train.max_steps=100000 --set train.eval_interval=100000",
            "grep -q \"\\\"step\\\":2\" " + run + "/metrics.jsonl 2>/dev/null", "INT",
            t.d.file("int.log"));
  auto s = read_json(run + "/summary.json");
  ASSERT_TRUE(s.contains("val_loss")) << s.dump(2);
  EXPECT_TRUE(s["val_loss"].is_null());
  EXPECT_NE(s.value("val_loss_unknown_reason", std::string()).find("stopped by signal 2"),
            std::string::npos)
      << s.dump(2);
  auto r = t.train("zero", "--set train.max_steps=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  s = read_json(t.d.file("zero/summary.json"));
  EXPECT_TRUE(s["val_loss"].is_null());
  EXPECT_NE(s.value("val_loss_unknown_reason", std::string()).find("no step ran"),
            std::string::npos)
      << s.dump(2);
}

// A CONFIG beside --resume is not read once the run has a checkpoint: said at run time.
TEST(ResumeNotes, AConfigGivenWithResumeIsSaidToBeUnread) {
  TinyRun t;
  auto r = t.train("run", "--stop-at 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = t.train("run", "--resume --stop-at 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(t.cfg + " is not read; the checkpoint's configuration continues (--set "
                                  "changes it)"),
            std::string::npos)
      << r.output;
}

// Raising train.max_steps on a resume kept nothing of the schedule: with lr_decay_steps = 0 the
// cosine decay follows max_steps, and the rate jumped up at the resumed step. The decay now
// keeps the checkpoint's end unless the command line sets train.lr_decay_steps.
TEST(ResumeNotes, RaisingMaxStepsOnResumeKeepsTheLearningRateSchedule) {
  TinyRun t;
  auto lr_at = [&](const std::string& run, int step) {
    for (const auto& line : read_jsonl(t.d.file(run + "/metrics.jsonl")))
      if (line.value("step", -1) == step && line.contains("lr")) return line["lr"].get<double>();
    ADD_FAILURE() << "no lr at step " << step;
    return 0.0;
  };
  for (const char* run : {"kept", "reset"}) {
    auto r = t.train(run);  // 6 steps: the decay ends at step 6
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  auto r =
      run_cmd(t.bin() + " train --out " + t.d.file("kept") + " --resume --set train.max_steps=12");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("note: train.max_steps 6 -> 12: the learning rate keeps the "
                          "checkpoint's schedule"),
            std::string::npos)
      << r.output;
  EXPECT_LE(lr_at("kept", 7), lr_at("kept", 6)) << "the rate jumped at the resumed step";
  EXPECT_DOUBLE_EQ(lr_at("kept", 12), 1e-4) << "after the decay: train.min_lr";
  std::stringstream toml;
  toml << std::ifstream(t.d.file("kept/config.toml")).rdbuf();
  EXPECT_NE(toml.str().find("lr_decay_steps = 6"), std::string::npos) << toml.str();
  // set on the command line (0: follow max_steps), the schedule is the user's
  r = run_cmd(t.bin() + " train --out " + t.d.file("reset") +
              " --resume --set train.max_steps=12 --set train.lr_decay_steps=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("keeps the checkpoint's schedule"), std::string::npos) << r.output;
  EXPECT_GT(lr_at("reset", 7), lr_at("reset", 6));
}

}  // namespace
}  // namespace gt
