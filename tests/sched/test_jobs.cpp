// Job lists: valid files, durations from a run summary, and bad input naming file/job/key.
#include <gtest/gtest.h>

#include "core/error.h"
#include "sched/jobs.h"
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
  auto p = d.write("jobs.toml", R"(
[[job]]
name = "resumed"
command = "greentrain train c.toml --out run --resume"
summary = "run"
earliest_start = 2020-06-01T18:00:00Z
deadline = 2020-06-02T08:00:00Z
)");
  auto jobs = load_jobs_toml(p, 0);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_DOUBLE_EQ(jobs[0].duration_s, 5.0);
  EXPECT_DOUBLE_EQ(jobs[0].power_w, 100.0);  // 500 J over 5 s
  // a summary without the whole run's wall time, or with unknown energy and no power_w
  d.write("run/summary.json", R"({"duration_s": 1.93, "energy_j": 200})");
  EXPECT_NE(error_of(p).find("wall_s"), std::string::npos) << error_of(p);
  d.write("run/summary.json",
          R"({"energy_unknown": true, "run_totals": {"wall_s": 5.0, "energy_j": 0}})");
  EXPECT_NE(error_of(p).find("power_w"), std::string::npos) << error_of(p);
}
