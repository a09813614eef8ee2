// Slurm submission: sbatch lines for a plan, and submission through a fake sbatch that records
// its arguments (no Slurm needed).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "sched/slurm.h"
#include "test_util.h"

using namespace gt::sched;
using gt::sched::test::TempDir;

namespace {

CarbonSeries valley_series() {
  // Two days of 15-min slots: high except a valley at slots 8..11 and 20..21.
  CarbonSeries s;
  s.start_s = civil_to_unix_s(2020, 6, 1, 0, 0, 0, 0);
  s.slot_s = 900;
  s.g_co2e_per_kwh.assign(32, 400.0);
  for (int i = 8; i < 12; ++i) s.g_co2e_per_kwh[i] = 100;
  for (int i = 20; i < 22; ++i) s.g_co2e_per_kwh[i] = 50;
  return s;
}

std::vector<Job> two_jobs(const CarbonSeries& s) {
  Job a;
  a.name = "fixed";
  a.script = "/jobs/fixed.sbatch";
  a.duration_s = 3600;
  a.power_w = 300;
  a.earliest_start_s = s.start_s;
  a.deadline_s = s.start_s + 6 * 3600;
  Job b = a;
  b.name = "resumable";
  b.script.clear();
  b.command = "greentrain train c.toml --out r --resume";
  b.duration_s = 5400;  // 6 slots: the 6 valley slots, in two runs
  b.interruptible = true;
  return {a, b};
}

}  // namespace

TEST(SchedSlurm, SbatchLinesCarryBeginDeadlineAndPreemptionOptions) {
  CarbonSeries s = valley_series();
  auto jobs = two_jobs(s);
  PlanOptions o;
  o.strategy = Strategy::interrupt;
  Plan p = make_plan(jobs, s, o);
  auto calls = sbatch_calls(p, jobs, 0);
  ASSERT_EQ(calls.size(), 3u);  // fixed: 1; resumable: 2 runs
  auto has = [](const SbatchCall& c, const std::string& a) {
    return std::find(c.args.begin(), c.args.end(), a) != c.args.end();
  };
  EXPECT_TRUE(has(calls[0], "--begin=2020-06-01T02:00:00"));
  EXPECT_TRUE(has(calls[0], "--deadline=2020-06-01T06:00:00"));
  EXPECT_FALSE(has(calls[0], "--requeue"));
  EXPECT_EQ(calls[0].args.back(), "/jobs/fixed.sbatch");
  EXPECT_TRUE(has(calls[1], "--begin=2020-06-01T02:00:00"));
  EXPECT_TRUE(has(calls[1], "--time=60"));
  EXPECT_TRUE(has(calls[1], "--signal=B:TERM@60"));
  EXPECT_TRUE(has(calls[1], "--requeue"));
  EXPECT_TRUE(has(calls[2], "--begin=2020-06-01T05:00:00"));
  EXPECT_TRUE(has(calls[2], "--dependency=afterany:{prev}"));
  EXPECT_EQ(calls[2].args.back(), "--wrap=greentrain train c.toml --out r --resume");
  EXPECT_EQ(sbatch_command_line("sbatch", calls[2]).find("'--wrap=greentrain train"),
            sbatch_command_line("sbatch", calls[2]).find("'--wrap="));
  EXPECT_NE(sbatch_command_line("sbatch", calls[2]).find("afterany:\"$PREV_JOBID\""),
            std::string::npos);
  // Times follow the stated offset.
  auto local = sbatch_calls(p, jobs, 2 * 3600);
  EXPECT_TRUE(has(local[0], "--begin=2020-06-01T04:00:00"));
}

TEST(SchedSlurm, SubmitsThroughFakeSbatchAndChainsRuns) {
  TempDir d;
  const std::string log = (d.path / "calls.log").string();
  const std::string fake = d.write("sbatch",
                                   "#!/bin/sh\n"
                                   "n=$(cat '" +
                                       log +
                                       ".n' 2>/dev/null || echo 100)\n"
                                       "n=$((n+1)); echo $n > '" +
                                       log +
                                       ".n'\n"
                                       "echo \"$@\" >> '" +
                                       log +
                                       "'\n"
                                       "echo \"$n;cluster\"\n");
  ::chmod(fake.c_str(), 0755);
  CarbonSeries s = valley_series();
  auto jobs = two_jobs(s);
  PlanOptions o;
  o.strategy = Strategy::interrupt;
  Plan p = make_plan(jobs, s, o);
  auto ids = submit_sbatch(sbatch_calls(p, jobs, 0), fake);
  EXPECT_EQ(ids, (std::vector<std::string>{"101", "102", "103"}));
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("--begin=2020-06-01T02:00:00 --deadline=2020-06-01T06:00:00"),
            std::string::npos);
  EXPECT_NE(lines[2].find("--dependency=afterany:102"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("--signal=B:TERM@60 --requeue"), std::string::npos) << lines[2];
  // A failing sbatch is an error naming the job.
  const std::string bad = d.write("bad", "#!/bin/sh\necho nope >&2\nexit 1\n");
  ::chmod(bad.c_str(), 0755);
  try {
    submit_sbatch(sbatch_calls(p, jobs, 0), bad);
    FAIL();
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("job 'fixed'"), std::string::npos) << e.what();
  }
}
