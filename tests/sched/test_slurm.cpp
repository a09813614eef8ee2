// Slurm submission: sbatch lines for a plan, and submission through a fake sbatch that records
// its arguments (no Slurm needed).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
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
  EXPECT_TRUE(has(calls[0], "--time=66"));  // 60 min and the 6 min margin
  EXPECT_TRUE(has(calls[0], "--time-min=60"));
  EXPECT_EQ(calls[0].args.back(), "/jobs/fixed.sbatch");
  EXPECT_TRUE(has(calls[1], "--begin=2020-06-01T02:00:00"));
  EXPECT_TRUE(has(calls[1], "--time=61"));  // 60 min and the signal's lead
  EXPECT_TRUE(has(calls[1], "--signal=B:TERM@60"));
  EXPECT_TRUE(has(calls[1], "--requeue"));
  EXPECT_TRUE(has(calls[1], "--open-mode=append"));  // Slurm truncates a requeued job's log
  EXPECT_FALSE(has(calls[0], "--open-mode=append"));
  EXPECT_TRUE(has(calls[2], "--begin=2020-06-01T05:00:00"));
  EXPECT_TRUE(has(calls[2], "--dependency=afterany:{prev}"));
  EXPECT_EQ(calls[2].args.back(), "--wrap=exec greentrain train c.toml --out r --resume");
  EXPECT_EQ(sbatch_command_line("sbatch", calls[2]).find("'--wrap=exec greentrain train"),
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

// Issue 17.1: Slurm reads --begin and --deadline in the local zone of the host running sbatch,
// whatever the CSV's zone: a 02:00 UTC slot is 04:00 in Berlin in June (it was written 02:00,
// so a Berlin cluster started the job two hours early).
namespace {
struct TzEnv {  // sets $TZ for one test
  std::optional<std::string> old;
  explicit TzEnv(const char* tz) {
    if (const char* o = std::getenv("TZ")) old = o;
    ::setenv("TZ", tz, 1);
  }
  ~TzEnv() {
    if (old)
      ::setenv("TZ", old->c_str(), 1);
    else
      ::unsetenv("TZ");
  }
};
}  // namespace

TEST(SchedSlurm, BeginIsInTheZoneSbatchReadsItIn) {
  if (!std::filesystem::exists("/usr/share/zoneinfo/Europe/Berlin"))
    GTEST_SKIP() << "no tzdata (Debian package tzdata)";
  CarbonSeries s = valley_series();
  auto jobs = two_jobs(s);
  Plan p = make_plan(jobs, s, PlanOptions{});
  auto has = [](const SbatchCall& c, const std::string& a) {
    return std::find(c.args.begin(), c.args.end(), a) != c.args.end();
  };
  {
    TzEnv tz("Europe/Berlin");  // the host's zone: CEST, UTC+2, in June
    auto calls = sbatch_calls(p, jobs, SlurmZone::local());
    EXPECT_TRUE(has(calls[0], "--begin=2020-06-01T04:00:00"))
        << ::testing::PrintToString(calls[0].args);
    EXPECT_TRUE(has(calls[0], "--deadline=2020-06-01T08:00:00"));
    EXPECT_NE(SlurmZone::local().describe().find("TZ=Europe/Berlin"), std::string::npos);
  }
  {
    TzEnv tz("UTC");  // a named --cluster-tz wins over the host's zone, daylight saving included
    const SlurmZone berlin = SlurmZone::parse("Europe/Berlin");
    EXPECT_TRUE(has(sbatch_calls(p, jobs, berlin)[0], "--begin=2020-06-01T04:00:00"));
    EXPECT_EQ(berlin.wall_time(civil_to_unix_s(2020, 1, 15, 1, 0, 0, 0)), "2020-01-15T02:00:00");
    EXPECT_EQ(SlurmZone::local().wall_time(civil_to_unix_s(2020, 6, 1, 2, 0, 0, 0)),
              "2020-06-01T02:00:00");
    EXPECT_EQ(std::getenv("TZ"), std::string("UTC"));  // restored after the named zone
  }
  EXPECT_EQ(SlurmZone::parse("+05:30").wall_time(0), "1970-01-01T05:30:00");
  EXPECT_EQ(SlurmZone::parse("+05:30").describe(), "UTC+05:30");
  EXPECT_THROW(SlurmZone::parse("Mars/Olympus_Mons"), gt::Error);
  EXPECT_THROW(SlurmZone::parse("../../etc/passwd"), gt::Error);
  EXPECT_THROW(SlurmZone::parse("+25"), gt::Error);
}

// Issue 17.1: --signal=B:TERM@60 signals the batch shell only. The --wrap command is exec'd, so
// the trainer is that shell and checkpoints; here the batch script is written as sbatch --wrap
// writes it, run by /bin/sh, and sent SIGTERM as Slurm would.
TEST(SchedSlurm, WrappedCommandReceivesTheBatchShellsSigterm) {
  TempDir d;
  const std::string mark = (d.path / "got-term").string(), pidf = (d.path / "pid").string();
  const std::string child =
      d.write("trainer.sh", "#!/bin/sh\necho $$ > '" + pidf + "'\ntrap 'echo TERM > \"" + mark +
                                "\"; exit 143' TERM\n"
                                "while :; do sleep 0.05; done\n");
  ::chmod(child.c_str(), 0755);
  CarbonSeries s = valley_series();
  auto jobs = two_jobs(s);
  jobs[1].command = child;
  PlanOptions o;
  o.strategy = Strategy::interrupt;
  auto calls = sbatch_calls(make_plan(jobs, s, o), jobs, 0);
  const std::string wrap = calls.back().args.back();
  ASSERT_EQ(wrap.rfind("--wrap=", 0), 0u) << wrap;
  EXPECT_EQ(wrap, "--wrap=exec " + child);
  const std::string batch =
      d.write("batch.sh",
              "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n" + wrap.substr(7) + "\n");
  const pid_t shell = ::fork();
  if (shell == 0) {
    ::execl("/bin/sh", "sh", batch.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 100 && !std::filesystem::exists(pidf); ++i) ::usleep(20000);
  ::usleep(100000);
  ::kill(shell, SIGTERM);  // B: the batch shell, nothing else
  int st = 0;
  ::waitpid(shell, &st, 0);
  for (int i = 0; i < 50 && !std::filesystem::exists(mark); ++i) ::usleep(20000);
  const bool got = std::filesystem::exists(mark);
  if (!got) {  // the shell died and left the trainer running: end it
    std::ifstream f(pidf);
    pid_t c = 0;
    if (f >> c && c > 0) ::kill(c, SIGKILL);
  }
  EXPECT_TRUE(got) << "the trainer did not receive the batch shell's SIGTERM";
}

TEST(SchedSlurm, InterruptibleCompoundCommandIsRefused) {
  CarbonSeries s = valley_series();
  auto jobs = two_jobs(s);
  jobs[1].command = "cd runs && greentrain train c.toml --out r --resume";
  PlanOptions o;
  o.strategy = Strategy::interrupt;
  try {
    sbatch_calls(make_plan(jobs, s, o), jobs, 0);
    FAIL() << "no error";
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("job 'resumable' is interruptible"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("script"), std::string::npos) << e.what();
  }
  EXPECT_EQ(exec_problem("greentrain train c.toml --out 'r 1' --resume"), "");
}

// Issue 17.2: a job CSV row without a command can be planned, but not submitted.
TEST(SchedSlurm, JobWithoutCommandIsNotSubmitted) {
  CarbonSeries s = valley_series();
  auto jobs = two_jobs(s);
  jobs[0].script.clear();
  try {
    sbatch_calls(make_plan(jobs, s, PlanOptions{}), jobs, 0);
    FAIL() << "no error";
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("job 'fixed' has no command or script"), std::string::npos)
        << e.what();
  }
}

// Issue 17.3: the plan's power limits are applied at submission: --gpu-power-limit (SPANK)
// for GPU jobs, train.power_limit on the greentrain train command for CPU jobs.
TEST(SchedSlurm, PlannedPowerLimitsAreApplied) {
  CarbonSeries s = valley_series();
  auto jobs = two_jobs(s);
  jobs[0].caps = {{300, 3600, 300}, {200, 4500, 180}};
  jobs[1].caps = {{150, 5400, 300}, {100, 5400, 200}};
  jobs[1].cap_device = CapDevice::cpu;
  PlanOptions o;
  o.strategy = Strategy::interrupt;
  const Plan p = make_plan(jobs, s, o);
  ASSERT_EQ(p.unscheduled(), 0u);
  EXPECT_EQ(p.jobs[1].cap_limit_w, 100);  // same time, less power
  auto calls = sbatch_calls(p, jobs, 0);
  const double gpu_limit = p.jobs[0].cap_limit_w;
  ASSERT_GT(gpu_limit, 0);
  bool gpu = false, cpu = false;
  for (const auto& c : calls)
    for (const auto& a : c.args) {
      if (c.job_name == "fixed" && a == fmt::format("--gpu-power-limit={:.0f}", gpu_limit))
        gpu = true;
      if (c.job_name == "resumable" && a.rfind("--wrap=exec greentrain train", 0) == 0) {
        // on the CPU packages, also on a node with GPUs (the trainer's auto takes the GPUs)
        EXPECT_NE(a.find("--resume --set train.power_limit=100 --set train.power_limit_device=cpu"),
                  std::string::npos)
            << a;
        cpu = true;
      }
    }
  EXPECT_TRUE(gpu);
  EXPECT_TRUE(cpu);
  jobs[1].command = "python3 train.py";
  EXPECT_THROW(sbatch_calls(make_plan(jobs, s, o), jobs, 0), gt::Error);
}

// A CPU cap on greentrain given by path (as the Slurm end-to-end test and many clusters run it,
// with the program outside the job's PATH) is applied too; other programs are refused.
TEST(SchedSlurm, PlannedCpuLimitOnGreentrainByPath) {
  CarbonSeries s = valley_series();
  auto jobs = two_jobs(s);
  jobs[1].caps = {{150, 5400, 300}, {100, 5400, 200}};
  jobs[1].cap_device = CapDevice::cpu;
  PlanOptions o;
  o.strategy = Strategy::interrupt;
  const Plan p = make_plan(jobs, s, o);
  ASSERT_EQ(p.jobs[1].cap_limit_w, 100);
  jobs[1].command = "/opt/gt/bin/greentrain train c.toml --out r --resume";
  bool seen = false;
  for (const auto& c : sbatch_calls(p, jobs, 0))
    if (c.job_name == "resumable") {
      EXPECT_EQ(c.args.back(),
                "--wrap=exec /opt/gt/bin/greentrain train c.toml --out r --resume "
                "--set train.power_limit=100 --set train.power_limit_device=cpu");
      seen = true;
    }
  EXPECT_TRUE(seen);
  for (const char* bad : {"/opt/gt/bin/greentrain-old train c.toml", "greentrain trainer c.toml",
                          "/opt/notgreentrain train c.toml", "greentrain tune c.toml"}) {
    jobs[1].command = bad;
    EXPECT_THROW(sbatch_calls(p, jobs, 0), gt::Error) << bad;
  }
}

// A data-parallel job (issue 18): ntasks/nodes from the job list, sbatch --ntasks/--nodes and
// the command under srun (exec'd when interruptible, so srun forwards SIGTERM to the ranks).
TEST(SchedSlurm, MultiTaskJobRunsUnderSrun) {
  TempDir d;
  auto p = d.write("jobs.toml", R"(
[[job]]
name = "dp"
command = "greentrain train c.toml --out r --resume"
duration_s = 3600
power_w = 200
earliest_start = 2020-06-01T00:00:00Z
deadline = 2020-06-01T06:00:00Z
interruptible = true
ntasks = 2
nodes = 1
)");
  auto jobs = load_jobs_toml(p, 0);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].ntasks, 2);
  EXPECT_EQ(jobs[0].nodes, 1);
  CarbonSeries s = valley_series();
  PlanOptions o;
  o.strategy = Strategy::interrupt;
  auto calls = sbatch_calls(make_plan(jobs, s, o), jobs, 0);
  ASSERT_FALSE(calls.empty());
  for (auto& c : calls) {
    EXPECT_NE(std::find(c.args.begin(), c.args.end(), "--ntasks=2"), c.args.end());
    EXPECT_NE(std::find(c.args.begin(), c.args.end(), "--nodes=1"), c.args.end());
    // SIGTERM to the ranks, not to srun (which would SIGKILL them)
    EXPECT_NE(std::find(c.args.begin(), c.args.end(), "--signal=TERM@60"), c.args.end());
    EXPECT_EQ(std::find(c.args.begin(), c.args.end(), "--signal=B:TERM@60"), c.args.end());
    EXPECT_EQ(c.args.back(),
              "--wrap=exec srun --mpi=pmix --kill-on-bad-exit=1 greentrain train c.toml --out r "
              "--resume");
  }
  auto bad = d.write("bad.toml", R"(
[[job]]
name = "dp"
command = "greentrain train c.toml"
duration_s = 3600
power_w = 200
earliest_start = 2020-06-01T00:00:00Z
deadline = 2020-06-01T06:00:00Z
ntasks = 1
nodes = 2
)");
  try {
    load_jobs_toml(bad, 0);
    ADD_FAILURE() << "nodes > ntasks accepted";
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nodes = 2 is more than ntasks = 1"), std::string::npos)
        << e.what();
  }
}

// Issue 31 §5: a wall clock in the repeated autumn hour names two instants; Slurm reads it at
// an offset of its own choosing (mktime with tm_isdst = -1). The sbatch call names the planned
// instant exactly (now+N), and says so; unambiguous times stay wall clocks.
TEST(SchedSlurm, AmbiguousLocalTimeIsWrittenAsTheExactInstant) {
  if (!std::filesystem::exists("/usr/share/zoneinfo/Europe/Berlin")) GTEST_SKIP() << "no tzdata";
  const SlurmZone berlin = SlurmZone::parse("Europe/Berlin");
  const UnixTimeS first = civil_to_unix_s(2020, 10, 25, 0, 0, 0, 0);  // 02:00 CEST
  EXPECT_TRUE(berlin.ambiguous(first));
  EXPECT_TRUE(berlin.ambiguous(first + 3600 + 1800));  // 02:30 CET, the second occurrence
  EXPECT_FALSE(berlin.ambiguous(first + 2 * 3600));    // 03:00 CET
  EXPECT_FALSE(berlin.ambiguous(first - 1));           // 01:59:59 CEST
  EXPECT_FALSE(SlurmZone::fixed(3600).ambiguous(first));
  Job j;
  j.name = "a";
  j.script = "a.sbatch";
  j.duration_s = 3600;
  j.power_w = 100;
  j.earliest_start_s = first;
  j.deadline_s = first + 4 * 3600;
  Plan p;
  JobPlan jp;
  jp.name = "a";
  jp.scheduled = true;
  jp.runs = {gt::sched::Run{first, first + 3600}};
  p.jobs = {jp};
  const auto calls = sbatch_calls(p, {j}, berlin);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_NE(std::find(calls[0].args.begin(), calls[0].args.end(),
                      fmt::format("--begin={{now+{}}}", first)),
            calls[0].args.end());
  EXPECT_NE(std::find(calls[0].args.begin(), calls[0].args.end(), "--deadline=2020-10-25T05:00:00"),
            calls[0].args.end());
  ASSERT_EQ(calls[0].notes.size(), 1u);
  EXPECT_NE(calls[0].notes[0].find("ambiguous in Europe/Berlin"), std::string::npos);
  EXPECT_NE(sbatch_command_line("sbatch", calls[0])
                .find(fmt::format("--begin=now+\"$(({} - $(date +%s)))\"", first)),
            std::string::npos)
      << sbatch_command_line("sbatch", calls[0]);
}

// Issue 31 §5: a plan in the past is refused naming the job; shifted to now on request; a
// passed deadline is refused always.
TEST(SchedSlurm, PlanInThePastIsRefusedOrShiftedToNow) {
  CarbonSeries s = valley_series();
  auto jobs = two_jobs(s);
  for (auto& j : jobs) j.deadline_s += 10 * 365 * 86400;  // deadlines in 2030
  PlanOptions o;
  o.strategy = Strategy::interrupt;
  const Plan p = make_plan(jobs, s, o);
  const UnixTimeS now = civil_to_unix_s(2026, 6, 1, 0, 0, 0, 0);
  std::vector<std::string> notes;
  try {
    plan_for_submission(p, jobs, now, false, &notes);
    ADD_FAILURE() << "a plan in 2020 was accepted in 2026";
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("job 'fixed': its planned start 2020-06-01"),
              std::string::npos)
        << e.what();
  }
  const Plan q = plan_for_submission(p, jobs, now, true, &notes);
  for (const auto& jp : q.jobs) {
    ASSERT_FALSE(jp.runs.empty());
    EXPECT_GE(jp.runs[0].start_s, now);
    for (std::size_t r = 1; r < jp.runs.size(); ++r)
      EXPECT_GE(jp.runs[r].start_s, jp.runs[r - 1].end_s);
  }
  EXPECT_EQ(q.jobs[0].runs[0].start_s, now);
  EXPECT_EQ(notes.size(), 2u);
  // within the grace (a plan made a minute ago): submitted as planned
  UnixTimeS first = p.jobs[0].runs[0].start_s;
  for (const auto& jp : p.jobs) first = std::min(first, jp.runs[0].start_s);
  EXPECT_EQ(plan_for_submission(p, jobs, first + 60, false, &notes).jobs[0].runs[0].start_s,
            p.jobs[0].runs[0].start_s);
  jobs[0].deadline_s = now - 1;
  EXPECT_THROW(plan_for_submission(p, jobs, now, true, &notes), gt::Error);
}

// A submission record whose fields have the wrong JSON types is refused with gt::Error naming the
// file, never nlohmann's type_error (bench/fuzz.sh found {"format": [...]} escaping as one).
TEST(SchedSlurm, SubmissionRecordOfWrongTypesIsRefusedNamingTheFile) {
  TempDir d;
  for (const char* text :
       {R"({"format": [{"job": "a"}], "submitted": []})", R"({"format": 1, "submitted": []})",
        R"({"format": "greentrain-submitted-2", "submitted": {}})",
        R"({"format": "greentrain-submitted-2", "submitted": [{"key": "k", "job_id": 5}]})",
        R"({"format": "greentrain-submitted-2", "submitted": [{"key": 5, "job_id": "5"}]})"}) {
    const std::string path = d.write("rec.json", text);
    try {
      read_submission_record(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const gt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("rec.json"), std::string::npos) << e.what();
    }
  }
  const std::string ok = d.write(
      "ok.json",
      R"({"format": "greentrain-submitted-2", "submitted": [{"key": "k", "job_id": "17"}]})");
  EXPECT_EQ(read_submission_record(ok), (std::map<std::string, std::string>{{"k", "17"}}));
}

// A record written before the time limits changed (format greentrain-submitted-1: keys with
// --time=LENGTH for interruptible runs only, no margin, no --time-min) matches no call of now,
// so a retry across the upgrade submitted every run again, those Slurm had queued twice. It is
// refused, naming the file, its runs and their Slurm ids, and what to do; sbatch is not run.
TEST(SchedSlurm, ARecordOfTheOldFormatIsRefusedNotSubmittedAgain) {
  TempDir d;
  // as the writer of 3b67517 wrote it: a job 'a' submitted, the next call failed
  const std::string rec =
      d.write("jobs.toml.submitted.json",
              R"({"format": "greentrain-submitted-1", "submitted": [{"job": "a", "run": 0,
          "job_id": "701", "key": "a#0\u001f--parsable\u001f--job-name=a\u001f--begin=2020-06-01T00:00:00\u001f--deadline=2020-06-01T05:00:00\u001f--comment=greentrain planned_power_w=100\u001f/jobs/a.sbatch"},
         {"job": "r", "run": 1, "job_id": "703", "key": "r#1"}]})");
  try {
    read_submission_record(rec);
    ADD_FAILURE() << "an old record was read as a current one";
  } catch (const gt::Error& e) {
    const std::string m = e.what();
    for (const char* want :
         {"jobs.toml.submitted.json: a submission record written by an earlier greentrain "
          "(format greentrain-submitted-1)",
          "a retry would submit every run again", "job 'a' run 0: Slurm job 701",
          "job 'r' run 1: Slurm job 703", "squeue -j 701,703", "then remove"})
      EXPECT_NE(m.find(want), std::string::npos) << want << " not in: " << m;
  }
  // submit_sbatch reads the record first: nothing is submitted
  const std::string log = (d.path / "calls.log").string();
  const std::string sbatch = d.write("sbatch", "#!/bin/sh\necho \"$@\" >> '" + log + "'\necho 9\n");
  ::chmod(sbatch.c_str(), 0755);
  SbatchCall c;
  c.job_name = "b";
  c.args = {"--parsable", "--job-name=b", "/jobs/b.sbatch"};
  EXPECT_THROW(submit_sbatch({c}, sbatch, rec), gt::Error);
  EXPECT_FALSE(std::filesystem::exists(log)) << "sbatch ran";
  // an old record that names no run has nothing Slurm has: read as empty
  EXPECT_TRUE(read_submission_record(
                  d.write("empty.json", R"({"format": "greentrain-submitted-1", "submitted": []})"))
                  .empty());
}

// A retry after a partly failed submission submits only the rest (review of `schedule`, item 1).
// (a) Without --shift-to-now the retry was refused once the start of a job Slurm already had
// had passed: plan_for_submission checked the start before the record was consulted. (b) With
// --shift-to-now a job already submitted was submitted again: its --begin, the retry's now, was
// part of the record's key. The key is the call as planned; another plan is submitted anew.
TEST(SchedSlurm, RetryOfAPartlyFailedSubmissionSubmitsOnlyTheRest) {
  TempDir d;
  const std::string log = (d.path / "calls.log").string(), n = (d.path / "n").string();
  // the second call of all fails, every other one prints its job id (1, 3, 4, ...)
  const std::string flaky =
      d.write("sbatch",
              "#!/bin/sh\nn=$(cat '" + n + "' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '" + n +
                  "'\n[ $n = 2 ] && { echo 'sbatch: error: busy' >&2; exit 1; }\necho \"$@\" >> '" +
                  log + "'\necho $n\n");
  ::chmod(flaky.c_str(), 0755);
  const UnixTimeS t0 = civil_to_unix_s(2020, 6, 1, 2, 0, 0, 0);
  auto job = [&](const std::string& name, UnixTimeS start) {
    Job j;
    j.name = name;
    j.script = "/jobs/" + name + ".sbatch";
    j.duration_s = 3600;
    j.power_w = 100;
    j.earliest_start_s = t0 - 3600;
    j.deadline_s = t0 + 24 * 3600;
    JobPlan jp;
    jp.name = name;
    jp.scheduled = true;
    jp.runs = {gt::sched::Run{start, start + 3600}};
    return std::make_pair(j, jp);
  };
  auto [a, pa] = job("a", t0);
  auto [b, pb] = job("b", t0 + 3 * 3600);
  const std::vector<Job> jobs = {a, b};
  Plan p;
  p.jobs = {pa, pb};
  const SlurmZone utc = SlurmZone::fixed(0);
  auto lines = [&] {
    std::ifstream in(log);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  };
  auto submit = [&](const std::string& record, const Plan& plan, UnixTimeS now, bool shift) {
    std::vector<std::string> notes;
    const auto calls =
        submission_calls(plan, jobs, utc, now, shift, read_submission_record(record), &notes);
    return submit_sbatch(calls, flaky, record);
  };
  // (a) submitted before a's start: a is queued (job 1), b fails; the retry comes an hour after
  // a's start, which Slurm has: only b is submitted, as planned
  const std::string rec = (d.path / "a.submitted.json").string();
  EXPECT_THROW(submit(rec, p, t0 - 60, false), gt::Error);
  std::vector<std::string> ids;
  ASSERT_NO_THROW(ids = submit(rec, p, t0 + 3600, false));
  EXPECT_EQ(ids, (std::vector<std::string>{"1", "3"}));
  auto l = lines();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_NE(l[0].find("--job-name=a "), std::string::npos) << l[0];
  EXPECT_NE(l[1].find("--job-name=b --begin=2020-06-01T05:00:00"), std::string::npos) << l[1];
  // b's start has passed too now: without --shift-to-now b is still refused
  std::filesystem::remove(rec);
  std::filesystem::remove(log);
  std::filesystem::remove(n);
  EXPECT_THROW(submit(rec, p, t0 - 60, false), gt::Error);
  EXPECT_THROW(submit(rec, p, t0 + 5 * 3600, false), gt::Error);
  // (b) a plan in the past, shifted to now: a is queued (job 1), b fails; the retry two minutes
  // later (another now, another --begin) submits only b
  std::filesystem::remove(rec);
  std::filesystem::remove(log);
  std::filesystem::remove(n);
  const UnixTimeS late = t0 + 10 * 3600;
  EXPECT_THROW(submit(rec, p, late, true), gt::Error);
  ASSERT_NO_THROW(ids = submit(rec, p, late + 120, true));
  EXPECT_EQ(ids, (std::vector<std::string>{"1", "3"}));
  l = lines();
  ASSERT_EQ(l.size(), 2u) << ::testing::PrintToString(l);
  EXPECT_NE(l[0].find("--job-name=a --begin=2020-06-01T12:00:00"), std::string::npos) << l[0];
  EXPECT_NE(l[1].find("--job-name=b --begin=2020-06-01T12:02:00"), std::string::npos) << l[1];
  // the same command a third time submits nothing
  ASSERT_NO_THROW(ids = submit(rec, p, late + 300, true));
  EXPECT_EQ(ids, (std::vector<std::string>{"1", "3"}));
  EXPECT_EQ(lines().size(), 2u);
  // another plan of a (planned an hour later, from another series, say) is not the job Slurm
  // has: it is submitted
  Plan q = p;
  q.jobs[0].runs[0] = {t0 + 3600, t0 + 7200};
  ASSERT_NO_THROW(ids = submit(rec, q, late + 400, true));
  EXPECT_EQ(ids, (std::vector<std::string>{"4", "3"}));
  EXPECT_EQ(lines().size(), 3u);
}

// The signal of an interruptible job's run comes 60 s before its time limit (review of
// `schedule`, item 2). --time was the run's length, so every run was stopped 60 s before its
// planned work was done, and the last (no run after it, no requeue) never finished the job:
// a 6 h job in runs of 4 h and 2 h got --time=240 and --time=120, each --signal=B:TERM@60.
TEST(SchedSlurm, EveryRunOfAnInterruptibleJobIsSignalledAfterItsPlannedWork) {
  const UnixTimeS t0 = civil_to_unix_s(2020, 6, 1, 0, 0, 0, 0);
  Job j;
  j.name = "long";
  j.command = "greentrain train c.toml --out r --resume";
  j.duration_s = 6 * 3600;
  j.power_w = 100;
  j.interruptible = true;
  j.earliest_start_s = t0;
  j.deadline_s = t0 + 10 * 3600;  // the last run ends at the deadline
  Plan p;
  JobPlan jp;
  jp.name = j.name;
  jp.scheduled = true;
  jp.runs = {gt::sched::Run{t0, t0 + 4 * 3600}, gt::sched::Run{t0 + 8 * 3600, t0 + 10 * 3600}};
  p.jobs = {jp};
  for (int ntasks : {1, 2}) {
    j.ntasks = ntasks;
    const auto calls = sbatch_calls(p, {j}, 0);
    ASSERT_EQ(calls.size(), 2u);
    for (std::size_t r = 0; r < calls.size(); ++r) {
      const auto& a = calls[r].args;
      auto value = [&](const std::string& prefix) -> std::optional<std::string> {
        for (const auto& x : a)
          if (x.rfind(prefix, 0) == 0) return x.substr(prefix.size());
        return std::nullopt;
      };
      const auto time = value("--time="),
                 signal = value(ntasks > 1 ? "--signal=TERM@" : "--signal=B:TERM@");
      ASSERT_TRUE(time && signal) << ::testing::PrintToString(a);
      const std::int64_t len = jp.runs[r].end_s - jp.runs[r].start_s;
      // the signal comes at the time limit less its lead: after the run's planned work
      EXPECT_GE(std::stoll(*time) * 60 - std::stoll(*signal), len)
          << "run " << r << ": " << ::testing::PrintToString(a);
      // the last run ends at the deadline: Slurm reckons --deadline with --time-min, the run's
      // length, not with the lead on top (that cancelled the run)
      if (r + 1 == calls.size()) {
        const auto time_min = value("--time-min=");
        ASSERT_TRUE(time_min) << ::testing::PrintToString(a);
        EXPECT_LE(jp.runs[r].start_s + std::stoll(*time_min) * 60, j.deadline_s);
      }
    }
  }
}

// A job not interruptible was submitted without --time although its length is planned (review
// of `schedule`, item 3): Slurm then applies the partition's DefaultTime, which may end it
// early. Its --time is its length and a margin (10 %, at least 5 min), its --time-min its
// length (what Slurm reckons --deadline with); an interruptible job's last run gets the margin.
TEST(SchedSlurm, EveryJobHasATimeLimitWithAMarginBeyondItsPlannedEnd) {
  EXPECT_EQ(time_margin_s(6 * 3600), 2160);
  EXPECT_EQ(time_margin_s(600), 300);
  EXPECT_EQ(time_margin_s(0), 300);
  const UnixTimeS t0 = civil_to_unix_s(2020, 6, 1, 0, 0, 0, 0);
  auto one = [&](const std::string& name, std::int64_t len, bool interruptible) {
    Job j;
    j.name = name;
    j.command = "greentrain train c.toml --out " + name;
    j.duration_s = static_cast<double>(len);
    j.power_w = 100;
    j.interruptible = interruptible;
    j.earliest_start_s = t0;
    j.deadline_s = t0 + len;  // planned to end at its deadline
    JobPlan jp;
    jp.name = name;
    jp.scheduled = true;
    jp.runs = {gt::sched::Run{t0, t0 + len}};
    return std::make_pair(j, jp);
  };
  auto [a, pa] = one("six-hours", 6 * 3600, false);
  auto [b, pb] = one("ten-minutes", 600, false);
  auto [c, pc] = one("pieces", 6 * 3600, true);
  pc.runs = {gt::sched::Run{t0, t0 + 4 * 3600}, gt::sched::Run{t0 + 5 * 3600, t0 + 7 * 3600}};
  c.deadline_s = t0 + 7 * 3600;
  Job s = b;  // a batch script: the limit is sbatch's option, whatever the script says
  s.name = "script";
  s.command.clear();
  s.script = "/jobs/s.sbatch";
  JobPlan ps = pb;
  ps.name = "script";
  Plan p;
  p.jobs = {pa, pb, pc, ps};
  const auto calls = sbatch_calls(p, {a, b, c, s}, 0);
  ASSERT_EQ(calls.size(), 5u);
  auto args = [&](std::size_t i) { return ::testing::PrintToString(calls[i].args); };
  auto has = [&](std::size_t i, const std::string& x) {
    return std::find(calls[i].args.begin(), calls[i].args.end(), x) != calls[i].args.end();
  };
  EXPECT_TRUE(has(0, "--time=396") && has(0, "--time-min=360")) << args(0);  // 6 h + 36 min
  EXPECT_TRUE(has(1, "--time=15") && has(1, "--time-min=10")) << args(1);    // 10 + 5 min
  // pieces: the first run stops at its planned end (no margin: the next run goes on), the last
  // gets the lead and 10 % of the job's 6 h
  EXPECT_TRUE(has(2, "--time=241")) << args(2);
  EXPECT_TRUE(has(3, "--time=157") && has(3, "--time-min=120")) << args(3);  // 120 + 1 + 36
  EXPECT_TRUE(has(4, "--time=15") && has(4, "--time-min=10")) << args(4);
}
