// Job lists: valid files, durations from a run summary, and bad input naming file/job/key.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "sched/jobs.h"
#include "sched/planner.h"
#include "test_util.h"

using namespace gt::sched;
using gt::sched::test::TempDir;

namespace {
std::string error_of(const std::string& path, std::int64_t off = 0) {
  try {
    load_jobs_toml(path, off);
  } catch (const gt::Error& e) {
    return e.what();
  }
  return "";
}

// A job list of one job, `file` in d: the TOML lines `keys` (name and command among them), then
// its window, earliest_start to deadline (TOML date-times). Returns the file's path.
std::string write_job(const TempDir& d, const std::string& file, const std::string& keys,
                      const std::string& earliest_start = "2020-06-01T18:00:00",
                      const std::string& deadline = "2020-06-02T08:00:00") {
  return d.write(file, "[[job]]\n" + keys + "\nearliest_start = " + earliest_start +
                           "\ndeadline = " + deadline + "\n");
}

// A power profile as `greentrain tune` writes it, `file` in d: 200 W (30 J and 0.2 s a step)
// and 300 W (40 J, 0.16 s). `devices` stands before "points" as it is: `"devices": [...], ` or
// nothing (a profile not written by tune). Returns the file's path.
std::string write_profile(const TempDir& d, const std::string& file,
                          const std::string& devices = "") {
  return d.write(file, R"({"format": "greentrain-power-profile-1", )" + devices + R"("points": [
    {"limit_w": 200, "energy_per_step_j": 30, "time_per_step_s": 0.2},
    {"limit_w": 300, "energy_per_step_j": 40, "time_per_step_s": 0.16}]})");
}
}  // namespace

TEST(SchedJobs, LoadsJobsWithOffsetsAndSummaryDuration) {
  TempDir d;
  std::filesystem::create_directory(d.path / "run1");
  d.write("run1/summary.json",
          R"({"duration_s": 5000, "wall_s": 5400.5, "energy_j": 1e6,
              "run_totals": {"sessions": 1, "duration_s": 5000, "wall_s": 5400.5, "energy_j": 1e6}})");
  auto p = d.write("jobs.toml", R"(
[[job]]
name = "a"
command = "greentrain train x.toml --out r"
duration_s = 3600
power_w = 250
earliest_start = 2020-06-01T18:00:00
deadline = "2020-06-02 08:00"
interruptible = true

[[job]]
name = "b"
script = "b.sbatch"
summary = "run1"
power_w = 100.5
earliest_start = 2020-06-01T18:00:00+02:00
deadline = 2020-06-02T08:00:00Z
)");
  auto jobs = load_jobs_toml(p, 3600);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].name, "a");
  EXPECT_DOUBLE_EQ(jobs[0].duration_s, 3600);
  EXPECT_TRUE(jobs[0].interruptible);
  EXPECT_EQ(jobs[0].earliest_start_s, civil_to_unix_s(2020, 6, 1, 17, 0, 0, 0));  // UTC+1
  EXPECT_EQ(jobs[0].deadline_s, civil_to_unix_s(2020, 6, 2, 7, 0, 0, 0));
  EXPECT_DOUBLE_EQ(jobs[1].duration_s, 5400.5);
  EXPECT_EQ(jobs[1].script, (d.path / "b.sbatch").string());
  EXPECT_FALSE(jobs[1].interruptible);
  EXPECT_EQ(jobs[1].earliest_start_s, civil_to_unix_s(2020, 6, 1, 16, 0, 0, 0));  // own offset
  EXPECT_EQ(jobs[1].deadline_s, civil_to_unix_s(2020, 6, 2, 8, 0, 0, 0));
}

TEST(SchedJobs, UnknownKeyIsAnError) {
  TempDir d;
  auto p = d.write("j.toml", R"(
[[job]]
name = "a"
command = "x"
duration_s = 10
power_w = 1
earliest_start = 2020-06-01T18:00:00
deadline = 2020-06-01T19:00:00
gpus = 4
)");
  std::string m = error_of(p);
  EXPECT_NE(m.find("j.toml"), std::string::npos) << m;
  EXPECT_NE(m.find("job 'a'"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown key 'gpus'"), std::string::npos) << m;
}

TEST(SchedJobs, DeadlineBeforeEarliestStartIsAnError) {
  TempDir d;
  auto p = d.write("j.toml", R"(
[[job]]
name = "late"
command = "x"
duration_s = 10
power_w = 1
earliest_start = 2020-06-01T18:00:00
deadline = 2020-06-01T17:00:00
)");
  std::string m = error_of(p);
  EXPECT_NE(m.find("job 'late'"), std::string::npos) << m;
  EXPECT_NE(m.find("deadline"), std::string::npos) << m;
  EXPECT_NE(m.find("not after earliest_start"), std::string::npos) << m;
}

TEST(SchedJobs, OtherBadInputIsAnErrorNamingTheKey) {
  TempDir d;
  const std::string head = "[[job]]\nname = \"a\"\n";
  const std::string times =
      "earliest_start = 2020-06-01T18:00:00\ndeadline = 2020-06-01T19:00:00\n";
  EXPECT_NE(error_of(d.write("1.toml", head + "duration_s = 1\npower_w = 1\n" + times))
                .find("exactly one of 'command' or 'script'"),
            std::string::npos);
  EXPECT_NE(
      error_of(d.write("2.toml", head + "command = \"x\"\nduration_s = -1\npower_w = 1\n" + times))
          .find("key 'duration_s'"),
      std::string::npos);
  EXPECT_NE(error_of(d.write("3.toml", head + "command = \"x\"\nduration_s = 1\n" + times))
                .find("missing key 'power_w'"),
            std::string::npos);
  EXPECT_NE(error_of(d.write("4.toml",
                             head + "command = \"x\"\nsummary = \"nope\"\npower_w = 1\n" + times))
                .find("summary.json"),
            std::string::npos);
  EXPECT_NE(error_of(d.write("5.toml", "jobs = 1\n")).find("unknown top-level key 'jobs'"),
            std::string::npos);
  EXPECT_NE(error_of(d.write("6.toml", "[[job]\n")).find("6.toml:"), std::string::npos);
  EXPECT_NE(error_of(d.write("7.toml", head + "command = \"x\"\nduration_s = 1\npower_w = 1\n" +
                                           times + head +
                                           "command = \"y\"\nduration_s = 1\n"
                                           "power_w = 1\n" +
                                           times))
                .find("duplicate name"),
            std::string::npos);
}

// Issue 12, part 8 (the same kind): a number that is not valid is named with its value.
TEST(SchedJobs, BadNumberIsNamedWithItsValue) {
  TempDir d;
  const std::string job =
      "[[job]]\nname = \"a\"\ncommand = \"x\"\nduration_s = 60\n"
      "earliest_start = 2020-06-01T18:00:00\ndeadline = 2020-06-01T19:00:00\n";
  const std::string e = error_of(d.write("p.toml", job + "power_w = \"300W\"\n"));
  EXPECT_NE(e.find("key 'power_w': '300W' is not valid; expected a positive number (W)"),
            std::string::npos)
      << e;
  const std::string e2 = error_of(d.write("q.toml", job + "power_w = -5\n"));
  EXPECT_NE(e2.find("-5 is not valid"), std::string::npos) << e2;
}

// Issue 17.1: a resumed run's duration is its whole wall time over all sessions (run_totals),
// not the last session's step time; its power, when not given, is its measured joules over that.
TEST(SchedJobs, SummaryGivesTheWholeRunsWallTimeAndJoules) {
  TempDir d;
  std::filesystem::create_directory(d.path / "run");
  d.write("run/summary.json", R"({"duration_s": 1.93, "wall_s": 2.5, "energy_j": 200,
    "run_totals": {"sessions": 2, "duration_s": 3.84, "wall_s": 5.0, "energy_j": 500}})");
  auto p = write_job(d, "jobs.toml", R"(name = "resumed"
command = "greentrain train c.toml --out run --resume"
summary = "run")",
                     "2020-06-01T18:00:00Z", "2020-06-02T08:00:00Z");
  auto jobs = load_jobs_toml(p, 0);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_DOUBLE_EQ(jobs[0].duration_s, 5.0);
  EXPECT_DOUBLE_EQ(jobs[0].power_w, 100.0);  // 500 J over 5 s
  // a summary without the whole run's wall time, or with unknown energy and no power_w
  d.write("run/summary.json", R"({"duration_s": 1.93, "energy_j": 200})");
  EXPECT_NE(error_of(p).find("wall_s"), std::string::npos) << error_of(p);
  // unknown because a session was killed without its summary: the reason is named
  d.write("run/summary.json", R"({"wall_s": 2.5, "run_totals": {"sessions": 2, "wall_s": null,
    "energy_j": null, "unknown_reason": "session 1 (from step 0) ended without writing"}})");
  EXPECT_NE(error_of(p).find("wall time) (unknown: session 1 (from step 0) ended without"),
            std::string::npos)
      << error_of(p);
  d.write("run/summary.json",
          R"({"energy_unknown": true, "run_totals": {"wall_s": 5.0, "energy_j": 0}})");
  EXPECT_NE(error_of(p).find("power_w"), std::string::npos) << error_of(p);
}

// A job's power from an estimated run's summary (CPU TDP x utilization: no counter) was planned
// as if measured; the job, its plan row and the plan's total say it is an estimate.
TEST(SchedJobs, PowerFromAnEstimatedRunIsMarkedEstimatedInThePlan) {
  TempDir d;
  std::filesystem::create_directory(d.path / "run");
  auto p = write_job(d, "jobs.toml", "name = \"est\"\ncommand = \"x\"\nsummary = \"run\"",
                     "2020-09-13T12:30:00Z", "2020-09-13T20:00:00Z");
  std::mt19937_64 rng(4);
  const CarbonSeries series = gt::sched::test::random_series(rng, 48);
  for (bool estimated : {true, false}) {
    d.write("run/summary.json", fmt::format(R"({{"energy_estimated": {}, "energy_method":
      "cpu-estimate: TDP 85 W x utilization", "run_totals": {{"wall_s": 3600, "energy_j": 360000}}}})",
                                            estimated));
    const auto jobs = load_jobs_toml(p, 0);
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_DOUBLE_EQ(jobs[0].power_w, 100.0);
    EXPECT_EQ(jobs[0].power_estimated_reason.empty(), !estimated);
    PlanOptions o;
    o.strategy = Strategy::shift;
    const Plan plan = make_plan(jobs, series, o);
    ASSERT_TRUE(plan.jobs[0].scheduled) << plan_table(plan, 0);
    const auto j = plan_to_json(plan, 0);
    EXPECT_EQ(j["jobs"][0]["estimated"], estimated) << j.dump(2);
    EXPECT_EQ(j["total"]["estimated"], estimated) << j.dump(2);
    const std::string t = plan_table(plan, 0);
    if (!estimated) {
      EXPECT_TRUE(j["jobs"][0]["estimated_reason"].is_null()) << j.dump(2);
      EXPECT_EQ(t.find("ESTIMATED"), std::string::npos) << t;
      continue;
    }
    const std::string why = j["jobs"][0]["estimated_reason"];
    EXPECT_NE(why.find("power from run, whose energy is an estimate (cpu-estimate: TDP 85 W"),
              std::string::npos)
        << why;
    EXPECT_NE(t.find("ESTIMATED planned_W, energy and gCO2e: " + why), std::string::npos) << t;
    EXPECT_NE(t.find("1 scheduled job(s), 1 of them ESTIMATED"), std::string::npos) << t;
  }
}

// A resumed run's power is its whole run's joules over its wall time, but whether those joules
// were an estimate was the last session's energy_estimated: a first session estimated and a
// second measured was planned as measured. run_totals.energy_estimated (any session's) says it
// now; a summary written before that key falls back to the session's flag.
TEST(SchedJobs, PowerFromAResumedRunWithAnEstimatedEarlierSessionIsEstimated) {
  TempDir d;
  std::filesystem::create_directory(d.path / "run");
  auto p = write_job(d, "jobs.toml", "name = \"resumed\"\ncommand = \"x\"\nsummary = \"run\"",
                     "2020-09-13T12:30:00Z", "2020-09-13T20:00:00Z");
  auto summary = [&](bool session_estimated, const std::string& totals_flag) {
    d.write("run/summary.json",
            fmt::format(R"({{"energy_estimated": {}, "energy_method": "RAPL counters",
      "run_totals": {{"sessions": 2, "wall_s": 3600, "energy_j": 360000{}}}}})",
                        session_estimated, totals_flag));
    const auto jobs = load_jobs_toml(p, 0);
    EXPECT_EQ(jobs.size(), 1u);
    EXPECT_DOUBLE_EQ(jobs.at(0).power_w, 100.0);
    return jobs.at(0).power_estimated_reason;
  };
  // the first session estimated, the second (the last) measured
  const std::string why = summary(false, R"(, "energy_estimated": true)");
  EXPECT_NE(why.find("power from run, whose energy is an estimate (estimated in an earlier "
                     "session of the run)"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("RAPL counters"), std::string::npos) << "not the estimate's method: " << why;
  EXPECT_TRUE(summary(false, R"(, "energy_estimated": false)").empty());
  EXPECT_NE(summary(true, R"(, "energy_estimated": true)").find("(RAPL counters)"),
            std::string::npos);
  // written before run_totals.energy_estimated: the session's flag
  EXPECT_FALSE(summary(true, "").empty());
  EXPECT_TRUE(summary(false, "").empty());
  // of another type: named, not read as measured
  d.write("run/summary.json", R"({"energy_estimated": false,
      "run_totals": {"wall_s": 3600, "energy_j": 360000, "energy_estimated": "yes"}})");
  EXPECT_NE(error_of(p).find("run_totals.energy_estimated is string; expected true or false"),
            std::string::npos)
      << error_of(p);
}

// Issue 17.2: nominal_start is the baseline's start; the window may open before it.
TEST(SchedJobs, NominalStartSeparateFromEarliestStart) {
  TempDir d;
  auto p = d.write("j.toml", R"(
[[job]]
name = "night"
command = "x"
duration_s = 1800
power_w = 1
nominal_start = 2020-06-02T01:00:00
earliest_start = 2020-06-01T23:00:00
deadline = 2020-06-02T03:30:00

[[job]]
name = "plain"
command = "x"
duration_s = 1800
power_w = 1
earliest_start = 2020-06-01T23:00:00
deadline = 2020-06-02T03:30:00
)");
  auto jobs = load_jobs_toml(p, 0);
  EXPECT_EQ(jobs[0].nominal_s(), civil_to_unix_s(2020, 6, 2, 1, 0, 0, 0));
  EXPECT_EQ(jobs[0].earliest_start_s, civil_to_unix_s(2020, 6, 1, 23, 0, 0, 0));
  EXPECT_EQ(jobs[1].nominal_s(), jobs[1].earliest_start_s);
  // a job of `duration_s` nominally at `nominal_start`, in the night's window
  auto night = [&](const std::string& file, int duration_s, const std::string& nominal_start) {
    return write_job(d, file,
                     fmt::format("name = \"a\"\ncommand = \"x\"\nduration_s = {}\npower_w = 1\n"
                                 "nominal_start = {}",
                                 duration_s, nominal_start),
                     "2020-06-01T23:00:00", "2020-06-02T03:30:00");
  };
  auto before = night("b.toml", 1800, "2020-06-01T22:00:00");
  std::string m = error_of(before);
  EXPECT_NE(m.find("nominal_start"), std::string::npos) << m;
  EXPECT_NE(m.find("before earliest_start"), std::string::npos) << m;
  auto late = night("l.toml", 7200, "2020-06-02T02:00:00");
  m = error_of(late);
  EXPECT_NE(m.find("ends after the deadline"), std::string::npos) << m;
}

// Issue 17.2: Let's Wait Awhile's deadline rules on the unshifted end (Monday = 2020-06-01).
TEST(SchedJobs, DeadlineRulesOfThePaper) {
  auto t = [](int day, int h, int m = 0) { return civil_to_unix_s(2020, 6, day, h, m, 0, 0); };
  const auto nw = DeadlineRule::next_workday, sw = DeadlineRule::semi_weekly;
  EXPECT_EQ(rule_deadline_s(nw, t(2, 12), 0), t(2, 12));     // Tuesday noon: no slack
  EXPECT_EQ(rule_deadline_s(nw, t(2, 7), 0), t(2, 9));       // before 09:00: that day 09:00
  EXPECT_EQ(rule_deadline_s(nw, t(2, 17, 30), 0), t(3, 9));  // after 17:00: next day 09:00
  EXPECT_EQ(rule_deadline_s(nw, t(2, 17), 0), t(2, 17));     // 17:00 itself is not after
  EXPECT_EQ(rule_deadline_s(nw, t(5, 18), 0), t(6, 9));      // Friday evening: Saturday (quirk)
  EXPECT_EQ(rule_deadline_s(nw, t(6, 12), 0), t(8, 9));      // Saturday: Monday 09:00
  EXPECT_EQ(rule_deadline_s(nw, t(7, 3), 0), t(8, 9));       // Sunday: Monday 09:00
  EXPECT_EQ(rule_deadline_s(sw, t(1, 9, 30), 0), t(4, 9));   // Monday after 09:00: Thursday
  EXPECT_EQ(rule_deadline_s(sw, t(4, 9), 0), t(4, 9));       // Thursday 09:00 itself
  EXPECT_EQ(rule_deadline_s(sw, t(4, 9, 30), 0), t(8, 9));   // Thursday after: Monday
  EXPECT_EQ(rule_deadline_s(sw, t(8, 8), 0), t(8, 9));       // Monday before 09:00: that day
  EXPECT_EQ(rule_deadline_s(sw, t(6, 20), 0), t(8, 9));      // Saturday: Monday
  EXPECT_EQ(rule_deadline_s(DeadlineRule::none, t(6, 20), 0), t(6, 20));
  // the wall clock is read in the jobs' zone: 16:30 UTC is 18:30 at UTC+2, after 17:00
  EXPECT_EQ(rule_deadline_s(nw, t(2, 16, 30), 7200), t(3, 7));
  EXPECT_EQ(parse_deadline_rule("next_workday"), nw);
  EXPECT_EQ(parse_deadline_rule("semi-weekly"), sw);
  EXPECT_THROW(parse_deadline_rule("weekly"), gt::Error);
}

// Issue 17.2: a job list from CSV, the paper's ml_jobs_seed0.csv columns included.
TEST(SchedJobs, LoadsJobCsv) {
  TempDir d;
  auto p = d.write("jobs.csv",
                   "job_id,arrival_minute,duration_minutes,arrival_time\n"
                   "0,570,3180,2020-01-01 09:30:00\n"
                   "1,2070,240,2020-01-02 10:30:00\n");
  JobCsvOptions o;
  o.power_w = 500;
  o.rule = DeadlineRule::next_workday;
  o.deadline_grace_s = 1800;
  auto jobs = load_jobs_csv(p, 0, o);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].name, "0");
  EXPECT_DOUBLE_EQ(jobs[0].duration_s, 3180 * 60.0);
  EXPECT_DOUBLE_EQ(jobs[0].power_w, 500);
  EXPECT_EQ(jobs[0].nominal_s(), civil_to_unix_s(2020, 1, 1, 9, 30, 0, 0));
  EXPECT_EQ(jobs[0].earliest_start_s, jobs[0].nominal_s());
  // ends Friday 2020-01-03 14:30: no slack, plus the grace
  EXPECT_EQ(jobs[0].deadline_s, civil_to_unix_s(2020, 1, 3, 15, 0, 0, 0));
  // ends Thursday 14:30: no slack either
  EXPECT_EQ(jobs[1].deadline_s, civil_to_unix_s(2020, 1, 2, 15, 0, 0, 0));
  EXPECT_TRUE(jobs[0].command.empty());
  JobCsvOptions w;
  w.window_s = 7200;
  auto own = d.write("own.csv",
                     "name,nominal_start,duration_s,power_w,interruptible,command\n"
                     "a,2020-01-01 01:00:00,1800,250,true,greentrain train c.toml --out r\n");
  auto a = load_jobs_csv(own, 0, w);
  EXPECT_EQ(a[0].earliest_start_s, civil_to_unix_s(2020, 1, 1, -1 + 24, 0, 0, 0) - 86400);
  EXPECT_EQ(a[0].deadline_s, civil_to_unix_s(2020, 1, 1, 3, 30, 0, 0));
  EXPECT_TRUE(a[0].interruptible);
  EXPECT_EQ(a[0].command, "greentrain train c.toml --out r");
  EXPECT_DOUBLE_EQ(a[0].power_w, 250);
}

TEST(SchedJobs, JobCsvErrorsNameFileLineAndColumn) {
  TempDir d;
  auto err = [&](const std::string& text, JobCsvOptions o = {}) {
    if (o.power_w == 0) o.power_w = 1;
    auto p = d.write("j.csv", text);
    try {
      load_jobs_csv(p, 0, o);
    } catch (const gt::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string m = err("name,nominal_start,duration_s,gpus\na,2020-01-01 01:00,60,4\n");
  EXPECT_NE(m.find("j.csv:1: unknown column 'gpus'"), std::string::npos) << m;
  m = err("name,nominal_start,duration_s\na,2020-01-01 01:00,-60\n");
  EXPECT_NE(m.find("j.csv:2 column 'duration_s'"), std::string::npos) << m;
  // found by the fuzzer: a duration whose end overflows 64-bit seconds
  m = err("job_id,arrival_time,duration_minutes\n0,2020-01-01 00:30:00,601e300\n");
  EXPECT_NE(m.find("column 'duration_minutes': 3.606e+304 s is not valid; expected a duration "
                   "of at most"),
            std::string::npos)
      << m;
  m = err("job_id,arrival_minute,duration_minutes,arrival_time\n0,571,60,2020-01-01 09:30:00\n");
  EXPECT_NE(m.find("arrival_minute 571 does not match"), std::string::npos) << m;
  m = err("name,nominal_start,duration_s\na,2020-01-01 01:00,60\na,2020-01-01 02:00,60\n");
  EXPECT_NE(m.find("job 'a' appears twice"), std::string::npos) << m;
  m = err("name,nominal_start,duration_s\na,2020-01-01 01:00\n");
  EXPECT_NE(m.find("j.csv:2: 2 field(s); expected 3"), std::string::npos) << m;
  auto p = d.write("k.csv", "name,nominal_start,duration_s\na,2020-01-01 01:00,60\n");
  try {
    load_jobs_csv(p, 0, JobCsvOptions{});
    ADD_FAILURE() << "no power given";
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no column 'power_w'"), std::string::npos) << e.what();
  }
}

// Issue 17.3: a job's power-limit profile (what `greentrain tune` writes) gives its caps.
TEST(SchedJobs, PowerProfileGivesCapOptions) {
  TempDir d;
  write_profile(d, "tune.json");
  d.write("unknown.json", R"({"format": "greentrain-power-profile-1", "points": [
    {"limit_w": 300, "energy_per_step_j": null, "time_per_step_s": 0.16}]})");
  auto p = write_job(d, "j.toml", R"(name = "a"
command = "greentrain train c.toml --out r"
power_profile = "tune.json"
steps = 1000
cap_device = "cpu")");
  auto jobs = load_jobs_toml(p, 0);
  ASSERT_EQ(jobs[0].caps.size(), 2u);
  EXPECT_DOUBLE_EQ(jobs[0].caps[0].limit_w, 300);  // highest first
  EXPECT_DOUBLE_EQ(jobs[0].caps[0].duration_s, 160);
  EXPECT_DOUBLE_EQ(jobs[0].caps[0].power_w, 250);
  EXPECT_DOUBLE_EQ(jobs[0].caps[1].duration_s, 200);
  EXPECT_DOUBLE_EQ(jobs[0].caps[1].power_w, 150);
  EXPECT_DOUBLE_EQ(jobs[0].duration_s, 160);
  EXPECT_EQ(jobs[0].cap_device, CapDevice::cpu);
  std::string m;
  try {
    caps_from_profile((d.path / "unknown.json").string(), 10);
  } catch (const gt::Error& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("unknown.json: energy per step at 300 W is unknown"), std::string::npos) << m;
  auto both = write_job(d, "b.toml", R"(name = "a"
command = "x"
power_profile = "tune.json"
steps = 10
duration_s = 5)");
  m = error_of(both);
  EXPECT_NE(m.find("expected no duration_s"), std::string::npos) << m;
}

// A power profile holds for the kind of device it was measured on (review of `schedule`, item
// 4): a profile of `tune --simulate` (device sim:0) or of a GPU was taken for a job whose cap,
// cap_device = "cpu", goes to the CPU packages. It is refused, naming the job, the profile and
// both kinds; a profile of that kind, or one without a device list (not written by tune), is
// taken.
TEST(SchedJobs, PowerProfileOfAnotherKindOfDeviceIsRefused) {
  TempDir d;
  write_profile(d, "sim.json", R"("devices": ["sim:0"], )");
  write_profile(d, "gpu.json",
                R"J("devices": ["nvml:0 (NVIDIA H100, GPU-1)", "nvml:1 (NVIDIA H100, GPU-2)"], )J");
  write_profile(d, "cpu.json", R"J("devices": ["rapl:intel-rapl:0 (package-0)"], )J");
  write_profile(d, "none.json");
  write_profile(d, "bad.json", R"("devices": [3], )");
  auto job = [&](const std::string& file, const std::string& prof, const std::string& device) {
    return write_job(d, file,
                     fmt::format(R"(name = "capped"
command = "greentrain train c.toml --out r"
power_profile = "{}"
steps = 1000
cap_device = "{}")",
                                 prof, device));
  };
  std::string m = error_of(job("sim-cpu.toml", "sim.json", "cpu"));
  for (const std::string& part :
       {"sim-cpu.toml: job 'capped': its power_profile " + (d.path / "sim.json").string() +
            " was measured on sim:0, a simulated device (`greentrain tune --simulate`)",
        std::string("cap_device = \"cpu\" caps CPU packages (RAPL)")})
    EXPECT_NE(m.find(part), std::string::npos) << m;
  m = error_of(job("sim-gpu.toml", "sim.json", "gpu"));
  EXPECT_NE(m.find("caps NVIDIA GPUs (NVML)"), std::string::npos) << m;
  m = error_of(job("gpu-cpu.toml", "gpu.json", "cpu"));
  EXPECT_NE(m.find("was measured on nvml:0 (NVIDIA H100, GPU-1), NVIDIA GPUs (NVML), and "
                   "cap_device = \"cpu\" caps CPU packages (RAPL)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("or cap_device = \"gpu\" for this one"), std::string::npos) << m;
  m = error_of(job("cpu-gpu.toml", "cpu.json", "gpu"));
  EXPECT_NE(m.find("was measured on rapl:intel-rapl:0 (package-0), CPU packages (RAPL)"),
            std::string::npos)
      << m;
  m = error_of(job("bad.toml", "bad.json", "cpu"));
  EXPECT_NE(m.find("bad.json: 'devices' is not a list of device names"), std::string::npos) << m;
  EXPECT_EQ(error_of(job("gpu-gpu.toml", "gpu.json", "gpu")), "");
  EXPECT_EQ(error_of(job("cpu-cpu.toml", "cpu.json", "cpu")), "");
  EXPECT_EQ(error_of(job("none-cpu.toml", "none.json", "cpu")), "");
  std::vector<std::string> devices;
  caps_from_profile((d.path / "gpu.json").string(), 10, &devices);
  EXPECT_EQ(devices.size(), 2u);
}

// Issue 31 §6: every count and duration has a range. `steps` beside a power profile took 0 and
// negative counts (a job of no or negative length) and 1e300 (an infinite one); interruption_s
// took 1e300 s.
TEST(SchedJobs, StepsAndInterruptionSecondsHaveARange) {
  TempDir d;
  d.write("tune.json", R"({"format": "greentrain-power-profile-1", "points": [
    {"limit_w": 200, "energy_per_step_j": 30, "time_per_step_s": 0.2}]})");
  auto job = [&](const std::string& name, const std::string& keys) {
    return write_job(d, name, "name = \"a\"\ncommand = \"x\"\n" + keys);
  };
  const std::pair<const char*, const char*> cases[] = {
      {"steps = 0", "is not valid; expected a positive number"},
      {"steps = -3", "is not valid; expected a positive number"},
      {"steps = 2.5",
       "key 'steps': 2.5 is not valid; expected a whole number of steps in [1, 1e15]"},
      {"steps = 1e300", "key 'steps': 1e+300 is not valid; expected a whole number of steps"},
      // 1e12 steps of 0.2 s: 6,000 years
      {"steps = 1e12", "key 'steps' x time per step: "},
  };
  int i = 0;
  for (auto [keys, needle] : cases) {
    std::string m = error_of(job("s" + std::to_string(i++) + ".toml",
                                 std::string("power_profile = \"tune.json\"\n") + keys));
    EXPECT_NE(m.find(needle), std::string::npos) << keys << ": " << m;
  }
  std::string m = error_of(job("i.toml",
                               "duration_s = 3600\npower_w = 100\ninterruptible = true\n"
                               "interruption_s = 1e300"));
  EXPECT_NE(m.find("key 'interruption_s': expected seconds in [0, 315576000]"), std::string::npos)
      << m;
  auto ok = job("ok.toml", "power_profile = \"tune.json\"\nsteps = 1000");
  EXPECT_DOUBLE_EQ(load_jobs_toml(ok, 0)[0].duration_s, 200);
}

// Issue 17.3: interruption costs and a bound on interruptions, for interruptible jobs only.
TEST(SchedJobs, InterruptionCostKeys) {
  TempDir d;
  auto p = write_job(d, "j.toml", R"(name = "a"
command = "greentrain train c.toml --out r --resume"
duration_s = 3600
power_w = 100
interruptible = true
interruption_s = 90
max_interruptions = 2)");
  auto jobs = load_jobs_toml(p, 0);
  EXPECT_DOUBLE_EQ(jobs[0].interruption_s, 90);
  EXPECT_EQ(jobs[0].max_interruptions, 2);
  const std::string head = "name = \"a\"\ncommand = \"x\"\nduration_s = 3600\npower_w = 100\n";
  auto q = write_job(d, "k.toml", head + "interruption_s = 90");
  std::string m = error_of(q);
  EXPECT_NE(m.find("need interruptible = true"), std::string::npos) << m;
  auto r = write_job(d, "r.toml", head + "interruptible = true\nmax_interruptions = -2");
  m = error_of(r);
  EXPECT_NE(m.find("key 'max_interruptions'"), std::string::npos) << m;
}

// Found by fuzz/fuzz_jobs (284 s): a power profile whose "format" is not a string (and a summary
// whose "energy_unknown" is not a boolean) threw nlohmann's type_error out of the reader, a
// message naming neither file nor key, instead of gt::Error.
TEST(SchedJobs, ProfileAndSummaryFieldsOfOtherTypesAreErrorsNamingTheFile) {
  TempDir d;
  auto profile =
      d.write("p.json", R"({"format": "greentrain-power-profile-1", "format": [{"limit_w": 20}]})");
  try {
    caps_from_profile(profile, 10);
    FAIL() << "expected gt::Error";
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find(profile + ": not a greentrain power profile"),
              std::string::npos)
        << e.what();
  }
  auto summary =
      d.write("summary.json", R"({"run_totals": {"wall_s": 10}, "energy_unknown": "no"})");
  try {
    run_figures_from_summary(summary);
    FAIL() << "expected gt::Error";
  } catch (const gt::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find(summary + ": energy_unknown is string; expected true or false"),
        std::string::npos)
        << e.what();
  }
}

// Issue 17.3: an interruptible job with a summary and no interruption_s takes what an
// interruption cost its run (summary.json's "interruption", written by greentrain train:
// checkpoint write + restart), and says where the figure came from.
TEST(SchedJobs, InterruptionCostFromTheRunsOwnMeasurements) {
  TempDir d;
  std::filesystem::create_directories(d.path / "runs" / "a");
  const std::string job = R"(
[[job]]
name = "a"
command = "greentrain train c.toml --out runs/a --resume"
summary = "runs/a"
earliest_start = 2020-06-01T18:00:00Z
deadline = 2020-06-02T08:00:00Z
interruptible = true
)";
  auto p = d.write("jobs.toml", job);
  d.write("runs/a/summary.json", R"({"wall_s": 2, "run_totals": {"wall_s": 5.0, "energy_j": 500},
    "interruption": {"checkpoint_write_s": 1.5, "restart_s": 4.25, "restart_resumed": true,
                     "checkpoint_write_j": null, "restart_j": null}})");
  auto jobs = load_jobs_toml(p, 0);
  EXPECT_DOUBLE_EQ(jobs[0].interruption_s, 5.75);
  EXPECT_EQ(jobs[0].interruption_source.rfind("measured in runs/a (checkpoint write 1.5 s + "
                                              "restart 4.25 s)",
                                              0),
            0u)
      << jobs[0].interruption_source;
  // a fresh session's start-up stands in for the restart, and says so
  d.write("runs/a/summary.json", R"({"run_totals": {"wall_s": 5.0, "energy_j": 500},
    "interruption": {"checkpoint_write_s": 1, "restart_s": 2, "restart_resumed": false}})");
  jobs = load_jobs_toml(p, 0);
  EXPECT_DOUBLE_EQ(jobs[0].interruption_s, 3);
  EXPECT_NE(jobs[0].interruption_source.find("no resume was measured"), std::string::npos)
      << jobs[0].interruption_source;
  // without the record (an older greentrain), or with an unknown figure: 0, and why
  d.write("runs/a/summary.json", R"({"run_totals": {"wall_s": 5.0, "energy_j": 500}})");
  jobs = load_jobs_toml(p, 0);
  EXPECT_DOUBLE_EQ(jobs[0].interruption_s, 0);
  EXPECT_EQ(jobs[0].interruption_source.rfind("default 0: no 'interruption' record", 0), 0u)
      << jobs[0].interruption_source;
  d.write("runs/a/summary.json", R"({"run_totals": {"wall_s": 5.0, "energy_j": 500},
    "interruption": {"checkpoint_write_s": 1, "restart_s": null,
                     "seconds_unknown_reason": "no step ran in this session"}})");
  jobs = load_jobs_toml(p, 0);
  EXPECT_DOUBLE_EQ(jobs[0].interruption_s, 0);
  EXPECT_NE(jobs[0].interruption_source.find("interruption.restart_s is unknown (no step ran"),
            std::string::npos)
      << jobs[0].interruption_source;
  // a stated figure wins over the measurements
  d.write("runs/a/summary.json", R"({"run_totals": {"wall_s": 5.0, "energy_j": 500},
    "interruption": {"checkpoint_write_s": 1, "restart_s": 2}})");
  auto q = d.write("stated.toml", job + "interruption_s = 90\n");
  jobs = load_jobs_toml(q, 0);
  EXPECT_DOUBLE_EQ(jobs[0].interruption_s, 90);
  EXPECT_EQ(jobs[0].interruption_source, "stated");
  // a negative measurement is bad input, named
  d.write("runs/a/summary.json", R"({"run_totals": {"wall_s": 5.0, "energy_j": 500},
    "interruption": {"checkpoint_write_s": -1, "restart_s": 2}})");
  EXPECT_NE(error_of(p).find("interruption.checkpoint_write_s = -1"), std::string::npos)
      << error_of(p);
}
