// What a job takes from its run's files: its duration, power and interruption cost from the
// run's summary.json (estimated or measured), its power caps from a power profile of `greentrain
// tune` (of the right kind of device); their bad input named. Job lists: test_jobs.cpp.
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

namespace {
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
