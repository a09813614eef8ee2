// tests/energy/process_tree_test.cpp: the checks every front end shares for the CPU estimate's
// options (a TDP per socket in [1, 2000] W, a pid that is a running process), and a measured
// process tree that ends: its windows' energy is unknown with the reason, never 0 J. Python's
// Meter(cpu_tdp_w=-5) read 0 J with a "counter went backwards" flag, 1e9 read 505 MJ in 0.5 s,
// and Meter(pid=999999) read 0 J in every window. The tree takes in the orphans an adopter
// (measure, a child subreaper) reparented to itself.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <thread>

#include "core/error.h"
#include "energy/accumulator.h"
#include "energy/cpu_estimate.h"
#include "energy/meter.h"
#include "error_of.h"
#include "test_util.h"

namespace gt::energy {
using namespace test;

namespace {

using gt::test::error_of;

// A /proc with one process `pid` whose CPU time (jiffies) the test sets, and then removes.
struct OneProcess {
  TempDir d;
  int pid;
  explicit OneProcess(int p) : pid(p) { fake_proc(d.path, pid, 100); }
  void set(long jiffies) { fake_proc_pid_stat(d.path, pid, jiffies); }
  void end() { std::filesystem::remove_all(d / std::to_string(pid)); }
};

// The estimate reuses a reading younger than 5 ms: let each tick read /proc afresh.
void fresh() { std::this_thread::sleep_for(std::chrono::milliseconds(10)); }

}  // namespace

TEST(CpuTdpCheck, TakesOneToTwoThousandWattsAndNamesTheFrontEndsArgument) {
  for (double w : {1.0, 35.5, 2000.0}) EXPECT_NO_THROW(check_cpu_tdp_w(w, "cpu_tdp_w", "None"));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double w : {0.0, -5.0, 0.5, 2000.5, 1e9, nan, inf, -inf}) {
    const std::string e =
        error_of([&] { check_cpu_tdp_w(w, "cpu_tdp_w", "None or 0 (the CPU model's table)"); });
    EXPECT_EQ(e.rfind("cpu_tdp_w = ", 0), 0u) << w << ": " << e;
    EXPECT_NE(e.find("expected None or 0 (the CPU model's table) or a TDP per socket in "
                     "[1, 2000] W"),
              std::string::npos)
        << e;
  }
}

TEST(ProcessPidCheck, TakesZeroOrARunningProcessOnly) {
  EXPECT_NO_THROW(check_process_pid(0, "pid"));
  EXPECT_NO_THROW(check_process_pid(getpid(), "pid"));
  EXPECT_NE(error_of([] { check_process_pid(-1, "pid"); })
                .find("pid = -1: expected the id of a "
                      "running process (> 0)"),
            std::string::npos);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);  // reaped: gone from /proc
  const std::string e = error_of([&] { check_process_pid(child, "pid"); });
  EXPECT_NE(e.find(fmt::format("pid = {}: no such process", child)), std::string::npos) << e;
  OneProcess proc(4242);  // a proc_root of its own
  EXPECT_NO_THROW(check_process_pid(4242, "--process", proc.d.path));
  EXPECT_NE(error_of([&] {
              check_process_pid(4243, "--process", proc.d.path);
            }).find("--process = 4243: no such process"),
            std::string::npos);
}

// Meter::create checks its options whichever front end made them.
TEST(ProcessPidCheck, MeterCreateRefusesABadTdpOrPid) {
  TempDir d;
  MeterOptions o = manual_options(d.path);
  o.use_nvml = o.use_rocm_smi = o.use_rapl = o.use_daemon = false;
  o.cpu_tdp_w = -5;
  EXPECT_NE(error_of([&] { Meter::create(o); }).find("MeterOptions::cpu_tdp_w = -5"),
            std::string::npos);
  o.cpu_tdp_w = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(error_of([&] { Meter::create(o); }).find("MeterOptions::cpu_tdp_w = nan"),
            std::string::npos);
  o.cpu_tdp_w = 150;
  o.pid = -1;
  EXPECT_NE(error_of([&] { Meter::create(o); }).find("MeterOptions::pid = -1"), std::string::npos);
  o.pid = getpid();
  EXPECT_NE(Meter::create(o), nullptr);
}

// A reading that says the process is gone is not filled with the last power: the interval is
// unknown (a process that has ended draws nothing, and what it drew before its end is lost).
TEST(ProcessTree, AGoneReadingIsUnknownNotFilled) {
  Accumulator a(SensorKind::kEstimate, std::nullopt);
  ASSERT_FALSE(a.add(0, power(50)).has_value());
  ASSERT_TRUE(a.add(1, power(50))->trusted);
  Reading gone = failed("process 7 has ended (not in /proc)");
  gone.gone = true;
  auto iv = a.add(2, gone);
  ASSERT_TRUE(iv.has_value());
  EXPECT_FALSE(iv->trusted);
  EXPECT_TRUE(iv->unknown);
  EXPECT_TRUE(iv->gone);
  EXPECT_EQ(iv->energy_j, 0.0);
  EXPECT_EQ(iv->note, "process 7 has ended (not in /proc)");
  auto filled = a.add(3, failed("io error"));  // another failure is still filled
  EXPECT_FALSE(filled->unknown);
  EXPECT_GT(filled->energy_j, 0.0);
}

// The window during which the measured process ends, and every window after, has unknown
// energy with the reason; the windows before are measured.
TEST(ProcessTree, WindowsDuringAndAfterTheProcessEndsHaveUnknownEnergy) {
  OneProcess proc(4242);
  CpuEstimateOptions o;
  o.proc_root = proc.d.path;
  o.pid = proc.pid;
  o.tdp_w = 100;
  TempDir locks;
  ManualClock clk;
  Meter m(make_cpu_estimate(o), manual_options(locks.path), clk.clock());
  m.begin_window("before");
  clk.advance(1);
  proc.set(200);
  fresh();
  auto before = m.end_window("before");
  ASSERT_TRUE(before.known_energy_j().has_value()) << before.energy_unknown_reason;
  EXPECT_GT(before.energy_j, 0.0);

  m.begin_window("ends");
  clk.advance(1);
  proc.set(300);
  fresh();
  m.sample_now();
  proc.end();
  clk.advance(1);
  fresh();
  auto ends = m.end_window("ends");
  EXPECT_FALSE(ends.known_energy_j().has_value());
  EXPECT_TRUE(ends.domains.empty());
  EXPECT_NE(ends.energy_unknown_reason.find("process 4242 has ended"), std::string::npos)
      << ends.energy_unknown_reason;
  EXPECT_NE(ends.energy_unknown_reason.find("is a lower bound"), std::string::npos)
      << ends.energy_unknown_reason;

  m.begin_window("after");
  clk.advance(1);
  fresh();
  auto after = m.end_window("after");
  EXPECT_FALSE(after.known_energy_j().has_value());  // not 0 J
  EXPECT_NE(after.energy_unknown_reason.find("process 4242 has ended"), std::string::npos)
      << after.energy_unknown_reason;
}

// Without /proc/PID/task/TID/children (the scan of every process): an adopter's other
// children (the orphans of the tree it took in) and the time of those it reaped (its cutime +
// cstime) count as the tree's; its own CPU time does not.
TEST(ProcessTree, AnAdoptersOrphansAndTheirReapedTimeCountAsTheTrees) {
  TempDir d;
  fake_proc(d.path);  // cpuinfo and meminfo; the processes with their parents and cutime here:
  // pid (name) state ppid ... utime(14) stime cutime(16) cstime ... rss(24)
  auto proc = [&](int pid, int ppid, long utime, long cutime) {
    std::filesystem::create_directories(d / std::to_string(pid));
    write_file(d / (std::to_string(pid) + "/stat"),
               fmt::format("{} (p) S {} {} {} 0 -1 0 0 0 0 0 {} 0 {} 0 20 0 1 0 0 0 256\n", pid,
                           ppid, pid, pid, utime, cutime));
  };
  proc(4000, 1, 1000, 30);   // the adopter (measure): its own 1000 jiffies are not the tree's
  proc(4242, 4000, 100, 0);  // the command
  proc(4300, 4000, 50, 0);   // an orphan of the command's tree, adopted
  proc(4301, 4300, 20, 0);   // and its child
  proc(5000, 1, 700, 0);     // another process of the node
  auto energy = [&](int adopter) {
    CpuEstimateOptions o;
    o.proc_root = d.path;
    o.pid = 4242;
    o.adopter_pid = adopter;
    o.tdp_w = 100;
    fresh();
    auto sensors = make_cpu_estimate(o);
    const Reading r = sensors.at(0)->read(0);
    EXPECT_TRUE(r.ok) << r.error;
    return r.energy_j.value_or(-1);
  };
  const double alone = energy(0), adopted = energy(4000);
  ASSERT_GT(alone, 0.0);
  EXPECT_NEAR(adopted / alone, (100.0 + 50 + 20 + 30) / 100, 1e-9);
}

// The tree's CPU time never goes backwards: an orphan reaped by the adopter between the read
// of the adopter's reaped time (cutime) and of its own stat is in neither for one reading. That
// reading read as a counter going backwards (an untrusted fill in measure's output); it holds
// the last value, and the time is counted once when the cutime has it.
TEST(ProcessTree, ItsCpuTimeHoldsWhileAReapedOrphanIsInNeitherPlace) {
  TempDir d;
  fake_proc(d.path);
  auto proc = [&](int pid, int ppid, long utime, long cutime) {
    std::filesystem::create_directories(d / std::to_string(pid));
    write_file(d / (std::to_string(pid) + "/stat"),
               fmt::format("{} (p) S {} {} {} 0 -1 0 0 0 0 0 {} 0 {} 0 20 0 1 0 0 0 256\n", pid,
                           ppid, pid, pid, utime, cutime));
  };
  proc(4000, 1, 1000, 0);    // the adopter (measure)
  proc(4242, 4000, 100, 0);  // the command
  proc(4300, 4000, 50, 0);   // an adopted orphan
  CpuEstimateOptions o;
  o.proc_root = d.path;
  o.pid = 4242;
  o.adopter_pid = 4000;
  o.tdp_w = 100;
  auto sensors = make_cpu_estimate(o);
  auto read = [&] {
    fresh();
    const Reading r = sensors.at(0)->read(0);
    EXPECT_TRUE(r.ok) << r.error;
    return r.energy_j.value_or(-1);
  };
  const double both = read();
  ASSERT_GT(both, 0.0);
  std::filesystem::remove_all(d / "4300");  // reaped; the adopter's cutime not yet updated
  EXPECT_DOUBLE_EQ(read(), both);
  proc(4000, 1, 1000, 50);  // now in the adopter's cutime: counted once
  EXPECT_DOUBLE_EQ(read(), both);
  proc(4242, 4000, 130, 0);  // and the tree goes on from there
  EXPECT_NEAR(read() / both, 180.0 / 150, 1e-9);
}

}  // namespace gt::energy
