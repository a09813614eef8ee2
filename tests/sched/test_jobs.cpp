// Job lists: valid files (TOML and CSV), windows and the deadline rules, ranges, and bad input
// naming file/job/key. What a job takes from its run's files: test_job_runs.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "jobs_test_util.h"
#include "sched/jobs.h"
#include "sched/planner.h"
#include "test_util.h"

using namespace gt::sched;
using gt::sched::test::error_of;
using gt::sched::test::TempDir;
using gt::sched::test::write_job;

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
