// tests/energy/rapl_test.cpp: a fake powercap tree in a temporary folder: wraps, unreadable
// files, permission denied, overlapping zones.
#include "energy/rapl.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "energy/measurement_output.h"
#include "energy/meter.h"
#include "test_util.h"

namespace gt::energy {
using namespace test;

namespace {
const SensorInfo* find(const std::vector<SensorInfo>& v, const std::string& name) {
  for (auto& i : v)
    if (i.name == name) return &i;
  return nullptr;
}
// Options for a meter of the RAPL zones written under `d` alone (no GPU library, no estimate),
// without a sampling thread, its locks in `d`/locks.
MeterOptions zones_options(const TempDir& d) {
  MeterOptions o = manual_options(d / "locks");
  o.use_nvml = o.use_rocm_smi = o.use_estimate = false;
  o.powercap_root = d.path;
  return o;
}
std::vector<SensorInfo> infos(const SensorList& l) {
  std::vector<SensorInfo> v;
  for (auto& s : l) v.push_back(s->info());
  return v;
}
}  // namespace

TEST(Rapl, NoPowercapIsUnavailableWithReason) {
  TempDir d;
  auto l = detect_rapl(d / "nothing");
  ASSERT_EQ(l.size(), 1u);
  EXPECT_FALSE(l[0]->info().available);
  EXPECT_NE(l[0]->info().reason.find("no RAPL zones"), std::string::npos);
}

TEST(Rapl, RootFromEnvironment) {
  TempDir d;
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 5);
  EnvGuard g("GT_POWERCAP_ROOT", d.path);
  EXPECT_EQ(powercap_root(), d.path);
  EXPECT_EQ(powercap_root("/x"), "/x");
  auto v = infos(detect_rapl());
  ASSERT_TRUE(find(v, "rapl:package-0"));
  EXPECT_TRUE(find(v, "rapl:package-0")->available);
}

TEST(Rapl, OverlappingDomainsCountPackagePlusDramOnly) {
  TempDir d;
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 1);
  fake_rapl_zone(d.path, "intel-rapl:0:0", "core", 1);
  fake_rapl_zone(d.path, "intel-rapl:0:1", "uncore", 1);
  fake_rapl_zone(d.path, "intel-rapl:0:2", "dram", 1);
  fake_rapl_zone(d.path, "intel-rapl:1", "psys", 1);
  auto v = infos(detect_rapl(d.path));
  EXPECT_TRUE(find(v, "rapl:package-0")->counted);
  EXPECT_TRUE(find(v, "rapl:dram-0:2")->counted);
  EXPECT_EQ(find(v, "rapl:dram-0:2")->domain, "ram");
  EXPECT_FALSE(find(v, "rapl:core-0:0")->counted);
  EXPECT_FALSE(find(v, "rapl:uncore-0:1")->counted);
  EXPECT_FALSE(find(v, "rapl:psys")->counted);
  EXPECT_FALSE(find(v, "rapl:psys")->reason.empty());

  // Through the meter: 1 J on every zone counts 2 J (package + dram), not 5.
  MeterOptions o = zones_options(d);
  auto m = Meter::create(o);
  m->begin_window("w");
  for (auto z :
       {"intel-rapl:0", "intel-rapl:0:0", "intel-rapl:0:1", "intel-rapl:0:2", "intel-rapl:1"})
    set_rapl_uj(d.path, z, 1000001);
  auto r = m->end_window("w");
  EXPECT_NEAR(r.energy_j, 2.0, 1e-9);
  EXPECT_EQ(r.domains.size(), 2u);
}

// A counter that wraps is read at least twice per wrap range at max_plausible_power_w, whatever
// interval was asked for: AMD Zen's 2^32 x 15.3 uJ (65.5 kJ) at 10 kW is 6.6 s, so a 60 s
// interval samples it every 3.3 s (at 60 s a small step back looked like a plausible wrap and
// added 65.5 kJ, and a second wrap went unseen). Intel's 262 kJ: 13.1 s.
TEST(Rapl, WrappingCountersAreSampledWithinHalfTheirRange) {
  TempDir d;
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 1, 65532979200ULL);
  MeterOptions o = zones_options(d);
  o.interval_s = 60;
  EXPECT_NEAR(Meter::create(o)->sampling_period_s(), 0.5 * 65532.9792 / 1e4, 1e-9);
  o.interval_s = 0.1;  // a shorter interval stays as asked
  EXPECT_DOUBLE_EQ(Meter::create(o)->sampling_period_s(), 0.1);
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 1);  // Intel's 262143.3 J
  o.interval_s = 60;
  EXPECT_NEAR(Meter::create(o)->sampling_period_s(), 0.5 * 262143.32885 / 1e4, 1e-9);
  o.interval_s = 0;  // no sampling thread: none
  EXPECT_DOUBLE_EQ(Meter::create(o)->sampling_period_s(), 0.0);
}

TEST(Rapl, PsysAloneWhenNoPackageIsReadable) {
  TempDir d;
  fake_rapl_zone(d.path, "intel-rapl:0", "psys", 1);
  fake_rapl_zone(d.path, "intel-rapl:1:2", "dram", 1);
  auto v = infos(detect_rapl(d.path));
  EXPECT_TRUE(find(v, "rapl:psys")->counted);
  EXPECT_FALSE(find(v, "rapl:dram-1:2")->counted);
}

TEST(Rapl, UnitsOneMillionMicrojoulesOverOneSecondIsOneWatt) {
  TempDir d;
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 0);
  SensorList s = detect_rapl(d.path);
  ManualClock clk;
  Meter m(std::move(s), manual_options(d / "locks"), clk.clock());
  m.begin_window("w");
  clk.advance(1.0);
  set_rapl_uj(d.path, "intel-rapl:0", 1000000);
  auto r = m.end_window("w");
  EXPECT_DOUBLE_EQ(r.energy_j, 1.0);
  ASSERT_TRUE(r.avg_power_w);
  EXPECT_DOUBLE_EQ(*r.avg_power_w, 1.0);
  EXPECT_EQ(r.domains[0].method, Method::kCounter);
  EXPECT_FALSE(r.estimated);
}

TEST(Rapl, WrapsOnceAndSeveralTimesInsideOneWindow) {
  TempDir d;
  const unsigned long long range = 1000000;  // 1 J range to force wraps
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 900000, range);
  SensorList s = detect_rapl(d.path);
  ManualClock clk;
  Meter m(std::move(s), manual_options(d / "locks"), clk.clock());
  m.begin_window("w");
  // 0.9 -> wrap -> 0.3 (0.4 J) -> 0.8 (0.5 J) -> wrap -> 0.1 (0.3 J) -> wrap -> 0.05 (0.95 J)
  for (unsigned long long uj : {300000ULL, 800000ULL, 100000ULL, 50000ULL}) {
    clk.advance(0.1);
    set_rapl_uj(d.path, "intel-rapl:0", uj);
    m.sample_now();
  }
  auto r = m.end_window("w");
  EXPECT_NEAR(r.energy_j, 0.4 + 0.5 + 0.3 + 0.95, 1e-9);
  EXPECT_EQ(r.domains[0].wraps, 3);
  EXPECT_GT(r.energy_j, 0);
}

TEST(Rapl, UnreadableRangeFileFlagsBackwardsStepInsteadOfGuessing) {
  TempDir d;
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 0, std::nullopt);
  std::filesystem::create_directories(d / "intel-rapl:0/max_energy_range_uj");  // unreadable
  auto v = infos(detect_rapl(d.path));
  ASSERT_TRUE(find(v, "rapl:package-0")->available);
  EXPECT_FALSE(find(v, "rapl:package-0")->wrap_j);
  EXPECT_NE(find(v, "rapl:package-0")->reason.find("wrap range unknown"), std::string::npos);

  SensorList s = detect_rapl(d.path);
  ManualClock clk;
  Meter m(std::move(s), manual_options(d / "locks"), clk.clock());
  m.begin_window("w");
  clk.advance(1);
  set_rapl_uj(d.path, "intel-rapl:0", 2000000);  // 2 W
  m.sample_now();
  clk.advance(1);
  set_rapl_uj(d.path, "intel-rapl:0", 500000);  // backwards
  auto r = m.end_window("w");
  EXPECT_NEAR(r.energy_j, 4.0, 1e-9);  // 2 J read + 2 J filled at 2 W, not negative
  EXPECT_NEAR(r.domains[0].untrusted_s, 1.0, 1e-9);
  ASSERT_FALSE(r.flags.empty());
  EXPECT_NE(r.flags[0].find("untrusted"), std::string::npos);
}

// Issue 12, part 5: a RAPL counter that dips by 10 mJ is not a plausible wrap (262 kJ in 0.1 s);
// when it comes back, the value before the dip stays the base: 0.6 J, not 0.7 J.
TEST(Rapl, CounterThatDipsAndRecoversCountsTheTruth) {
  TempDir d;
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 1000000);
  ManualClock clk;
  Meter m(detect_rapl(d.path), manual_options(d / "locks"), clk.clock());
  m.begin_window("w");
  for (unsigned long long uj :
       {1100000ULL, 1200000ULL, 1190000ULL, 1400000ULL, 1500000ULL, 1600000ULL}) {
    clk.advance(0.1);
    set_rapl_uj(d.path, "intel-rapl:0", uj);
    m.sample_now();
  }
  auto r = m.end_window("w");
  EXPECT_NEAR(r.energy_j, 0.6, 1e-9);
}

// Issue 12, part 4: counting follows the zone hierarchy, not the names. package-0 rises 10 J and
// its sub-zone (named gpu, unnamed, or package-0-die-1) 5 J of it: 10 J in all.
TEST(Rapl, SubZoneOfAnyNameOtherThanDramIsInsideItsParent) {
  for (std::string sub : {"gpu", "", "package-0-die-1"}) {
    TempDir d;
    fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 0);
    fake_rapl_zone(d.path, "intel-rapl:0:1", sub, 0);
    auto v = infos(detect_rapl(d.path));
    ASSERT_EQ(v.size(), 2u);
    EXPECT_TRUE(v[0].counted);
    EXPECT_FALSE(v[1].counted) << "sub-zone '" << sub << "'";
    EXPECT_NE(v[1].reason.find("inside its parent zone intel-rapl:0 (package-0)"),
              std::string::npos)
        << v[1].reason;
    EXPECT_NE(v[0].name, v[1].name);
    ManualClock clk;
    Meter m(detect_rapl(d.path), manual_options(d / "locks"), clk.clock());
    m.begin_window("w");
    clk.advance(1);
    set_rapl_uj(d.path, "intel-rapl:0", 10000000);
    set_rapl_uj(d.path, "intel-rapl:0:1", 5000000);
    auto r = m.end_window("w");
    EXPECT_NEAR(r.energy_j, 10.0, 1e-9) << "sub-zone '" << sub << "'";
  }
}

TEST(Rapl, UnknownTopLevelZoneIsReportedAndNotCountedWhenPsysIs) {
  TempDir d;
  fake_rapl_zone(d.path, "intel-rapl:0", "psys", 0);
  fake_rapl_zone(d.path, "intel-rapl:1", "mystery", 0);
  auto v = infos(detect_rapl(d.path));
  ASSERT_TRUE(find(v, "rapl:psys") && find(v, "rapl:mystery"));
  EXPECT_TRUE(find(v, "rapl:psys")->counted);
  EXPECT_FALSE(find(v, "rapl:mystery")->counted);
  EXPECT_NE(find(v, "rapl:mystery")->reason.find("inside psys"), std::string::npos);
  ManualClock clk;
  Meter m(detect_rapl(d.path), manual_options(d / "locks"), clk.clock());
  m.begin_window("w");
  clk.advance(1);
  set_rapl_uj(d.path, "intel-rapl:0", 20000000);
  set_rapl_uj(d.path, "intel-rapl:1", 7000000);
  EXPECT_NEAR(m.end_window("w").energy_j, 20.0, 1e-9);
}

TEST(Rapl, TopLevelCoreZoneIsNotSaidToBeInsideAPackage) {
  {
    TempDir d;
    fake_rapl_zone(d.path, "intel-rapl:0", "core", 0);
    auto v = infos(detect_rapl(d.path));
    ASSERT_EQ(v.size(), 1u);
    EXPECT_TRUE(v[0].counted);  // nothing contains it: it is what there is to count
    EXPECT_EQ(v[0].reason.find("package"), std::string::npos) << v[0].reason;
  }
  {
    TempDir d;
    fake_rapl_zone(d.path, "intel-rapl:0", "core", 0);
    fake_rapl_zone(d.path, "intel-rapl:1", "psys", 0);
    auto v = infos(detect_rapl(d.path));
    EXPECT_FALSE(find(v, "rapl:core")->counted);
    EXPECT_EQ(find(v, "rapl:core")->reason.find("package"), std::string::npos);
    EXPECT_NE(find(v, "rapl:core")->reason.find("psys"), std::string::npos);
  }
}

TEST(Rapl, SensorNamesStayUnique) {
  TempDir d;
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 0);
  fake_rapl_zone(d.path, "intel-rapl:1", "package-0",
                 0);  // a firmware that names both sockets alike
  fake_rapl_zone(d.path, "intel-rapl:0:0", "", 0);
  fake_rapl_zone(d.path, "intel-rapl:1:0", "", 0);
  fake_rapl_zone(d.path, "intel-rapl:2", "", 0);
  auto v = infos(detect_rapl(d.path));
  std::set<std::string> names;
  for (auto& i : v) names.insert(i.name);
  EXPECT_EQ(names.size(), v.size());
  EXPECT_TRUE(find(v, "rapl:package-0@intel-rapl:0"));
  EXPECT_TRUE(find(v, "rapl:package-0@intel-rapl:1"));
}

// Issue 31 §5: two top-level zones that are one package's counter (mirrored per-die zones,
// codecarbon #1274; or both named package-0) count the package once; zones of one package with
// counters of their own are both counted.
TEST(Rapl, MirroredPackageZonesCountOnce) {
  for (auto names : {std::pair<std::string, std::string>{"package-0-die-0", "package-0-die-1"},
                     {"package-0", "package-0"}}) {
    TempDir d;
    fake_rapl_zone(d.path, "intel-rapl:0", names.first, 5000000);
    fake_rapl_zone(d.path, "intel-rapl:1", names.second, 5000000);
    fake_rapl_zone(d.path, "intel-rapl:2", "package-1",
                   5000000);  // another socket: its own, counted
    MeterOptions o = zones_options(d);
    auto m = Meter::create(o);
    int counted = 0;
    for (auto& i : m->sensors()) counted += i.counted && i.available;
    EXPECT_EQ(counted, 2) << names.first;
    m->begin_window("w");
    for (auto z : {"intel-rapl:0", "intel-rapl:1", "intel-rapl:2"})
      set_rapl_uj(d.path, z, 15000000);
    auto r = m->end_window("w");
    EXPECT_NEAR(r.energy_j, 20.0, 1e-9) << "10 J per package, the mirror once";
    bool said = false;
    for (auto& i : m->sensors()) said = said || i.reason.find("mirrors") != std::string::npos;
    EXPECT_TRUE(said);
  }
  TempDir d;  // two dies with counters of their own
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0-die-0", 5000000);
  fake_rapl_zone(d.path, "intel-rapl:1", "package-0-die-1", 90000000);
  auto v = infos(detect_rapl(d.path));
  EXPECT_TRUE(find(v, "rapl:package-0-die-0")->counted);
  EXPECT_TRUE(find(v, "rapl:package-0-die-1")->counted);
}

TEST(Rapl, RangeFileThatIsNotANumberIsNamedWithItsValue) {
  TempDir d;
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 0, std::nullopt);
  write_file(d / "intel-rapl:0/max_energy_range_uj", "lots\n");
  auto v = infos(detect_rapl(d.path));
  EXPECT_FALSE(v[0].wrap_j);
  EXPECT_NE(v[0].reason.find("max_energy_range_uj: 'lots' is not an integer"), std::string::npos)
      << v[0].reason;
}

TEST(Rapl, PermissionDeniedIsUnavailableWithReason) {
  TempDir d;
  fake_rapl_zone(d.path, "intel-rapl:0", "package-0", 7);
  fake_rapl_zone(d.path, "intel-rapl:0:0", "dram", 7);
  fake_rapl_zone(d.path, "intel-rapl:1", "package-1", 7);
  chmod((d / "intel-rapl:0/energy_uj").c_str(), 0400);  // root-only, as since Linux 5.10
  chmod((d / "intel-rapl:0:0/energy_uj").c_str(), 0400);
  chmod((d / "intel-rapl:1/max_energy_range_uj").c_str(), 0400);  // only the range is unreadable
  auto check = [&]() -> int {
    auto v = infos(detect_rapl(d.path));
    auto* p = find(v, "rapl:package-0");
    if (!p || p->available) return 2;
    if (p->reason.find("Permission denied") == std::string::npos) return 3;
    if (p->reason.find("root") == std::string::npos) return 4;
    // Issue 12, part 8: the range file's error gives no hint about energy_uj.
    auto* q = find(v, "rapl:package-1");
    if (!q || !q->available || q->wrap_j) return 5;
    if (q->reason.find("max_energy_range_uj: Permission denied") == std::string::npos) return 6;
    if (q->reason.find("energy_uj is") != std::string::npos) return 7;
    return 0;
  };
  if (geteuid() != 0) {
    EXPECT_EQ(check(), 0);
    return;
  }
  // As root every file is readable: check as an unprivileged user in a child process.
  for (auto& e : std::filesystem::recursive_directory_iterator(d.path))
    if (e.is_directory()) chmod(e.path().c_str(), 0755);
  chmod(d.path.c_str(), 0755);
  pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
    _exit(check());
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0)
      << "2: available, 3: no 'Permission denied', 4: no hint, 5-7: range file, 10: setuid";
}

}  // namespace gt::energy

namespace gt::energy {
using namespace test;

namespace {
MeterOptions rapl_options(const TempDir& d) {
  MeterOptions o = manual_options(d / "locks");
  o.use_nvml = o.use_rocm_smi = o.use_daemon = false;
  o.powercap_root = d / "powercap";
  return o;
}
// A rank of a multi-rank job on a node with one RAPL package, its GPU 0 on the fake NVML
// (counter 5 J, then 7 J once the test writes 7000 to gpu_mj, while the object lives): `options`
// reads both, the rank's place in the job left to the test.
struct RankOnNode {
  EnvGuard lib, energy;
  MeterOptions options;
  explicit RankOnNode(const TempDir& d)
      : lib("GT_NVML_LIBRARY", GT_FAKE_NVML),
        energy("FAKE_NVML_ENERGY_FILE", d / "gpu_mj"),
        options(rapl_options(d)) {
    fake_rapl_zone(d.path, "powercap/intel-rapl:0", "package-0", 1000000, std::nullopt);
    write_file(d / "gpu_mj", "5000\n");
    options.use_nvml = true;
    options.gpus = std::vector<int>{0};
  }
};
}  // namespace

// A process tree (--process) is measured by its own CPU/memory estimates: a readable RAPL
// counts every process of the package, so it is listed as machine-wide, not counted, not locked.
TEST(Rapl, ProcessTreeCountsItsEstimatesNotTheMachineWideCounter) {
  TempDir d;
  fake_rapl_zone(d.path, "powercap/intel-rapl:0", "package-0", 1000000, std::nullopt);
  fake_rapl_zone(d.path, "powercap/intel-rapl:0:0", "dram", 1000000, std::nullopt);
  MeterOptions o = rapl_options(d);
  o.pid = getpid();
  auto m = Meter::create(o);
  const auto v = m->sensors();
  ASSERT_TRUE(find(v, "rapl:package-0"));
  EXPECT_TRUE(find(v, "rapl:package-0")->available);
  EXPECT_FALSE(find(v, "rapl:package-0")->counted);
  EXPECT_NE(find(v, "rapl:package-0")->reason.find("machine-wide"), std::string::npos);
  EXPECT_FALSE(find(v, "rapl:dram-0:0")->counted);
  ASSERT_TRUE(find(v, "cpu-estimate"));
  EXPECT_TRUE(find(v, "cpu-estimate")->counted);
  EXPECT_TRUE(find(v, "ram-estimate")->counted);
  m->begin_window("w");
  set_rapl_uj(d.path, "powercap/intel-rapl:0", 5000001000000ULL);  // 5 MJ on the package: not ours
  auto r = m->end_window("w");
  for (auto& x : r.domains) EXPECT_EQ(x.sensor.rfind("rapl", 0), std::string::npos) << x.sensor;
  EXPECT_LT(r.energy_j, 1000.0);
  EXPECT_TRUE(r.estimated);
  // no RAPL lock taken: another process can be the package's reader beside it
  OtherReader other(o.lock_dir, "rapl-intel-rapl:0");
}

// The counter another process reads: the CPU estimate kept in reserve is counted instead,
// decided after the locks (it was left out before them, and the CPU vanished from the total).
TEST(Rapl, CounterReadByAnotherProcessIsReplacedByTheEstimate) {
  TempDir d;
  fake_rapl_zone(d.path, "powercap/intel-rapl:0", "package-0", 1000000, std::nullopt);
  MeterOptions o = rapl_options(d);
  OtherReader other(o.lock_dir, "rapl-intel-rapl:0");
  auto m = Meter::create(o);
  ASSERT_EQ(m->not_reader().size(), 1u);
  const auto v = m->sensors();
  EXPECT_TRUE(find(v, "cpu-estimate")->counted);
  m->begin_window("w");
  auto r = m->end_window("w");
  ASSERT_TRUE(r.known_energy_j());
  bool cpu = false;
  for (auto& x : r.domains) cpu = cpu || x.domain == "cpu";
  EXPECT_TRUE(cpu) << "the CPU domain is measured (estimated), not left out";
  EXPECT_TRUE(r.estimated);
  bool said = false;
  for (auto& f : r.flags) said = said || f.find("cpu-estimate counted") != std::string::npos;
  EXPECT_TRUE(said);
}

// A rank of a multi-rank job whose node's RAPL another rank reads (node_devices_shared): no
// machine-wide estimate stands in for it (the job's sum would count the CPU twice) and the
// window stays known (it was unknown, which made the whole job's energy unknown), its domains
// the rank's own devices only (none here).
TEST(Rapl, AnotherRankOfTheJobReadsTheNodesCounters) {
  TempDir d;
  RankOnNode rank(d);
  MeterOptions o = rank.options;
  o.node_devices_shared = true;
  OtherReader other(o.lock_dir, "rapl-intel-rapl:0"), other_ram(o.lock_dir, "ram-estimate-machine");
  auto m = Meter::create(o);
  ASSERT_EQ(m->not_reader().size(), 2u);
  EXPECT_FALSE(find(m->sensors(), "cpu-estimate")->counted);
  m->begin_window("w");
  write_file(d / "gpu_mj", "7000\n");
  auto r = m->end_window("w");
  ASSERT_TRUE(r.known_energy_j()) << r.energy_unknown_reason;
  EXPECT_DOUBLE_EQ(*r.known_energy_j(), 2.0);  // the GPU alone: the CPU is the other rank's
  for (auto& x : r.domains) EXPECT_EQ(x.domain, "gpu") << x.sensor;
}

// A rank that is not its node's local rank 0 (node_devices_elsewhere) leaves the node's RAPL
// and machine-wide estimates to that rank without taking their locks: another job's process
// that reads them is not taken for a rank of this job, and local rank 0 still gets them.
TEST(Rapl, ARankThatIsNotLocalRankZeroLeavesTheNodesCountersToIt) {
  TempDir d;
  RankOnNode rank(d);
  MeterOptions o = rank.options;
  o.node_devices_elsewhere = true;
  auto m = Meter::create(o);
  EXPECT_FALSE(find(m->sensors(), "cpu-estimate")->counted);
  // local rank 0 of the job (no flag) takes the node's counter: this rank holds no lock on it
  MeterOptions zero = rapl_options(d);
  auto m0 = Meter::create(zero);
  EXPECT_TRUE(m0->not_reader().empty()) << "a rank that leaves the counter took its lock";
  m->begin_window("w");
  write_file(d / "gpu_mj", "7000\n");
  auto r = m->end_window("w");
  ASSERT_TRUE(r.known_energy_j()) << r.energy_unknown_reason;
  EXPECT_DOUBLE_EQ(*r.known_energy_j(), 2.0);  // the GPU alone: the CPU is local rank 0's
  for (auto& x : r.domains) EXPECT_EQ(x.domain, "gpu") << x.sensor;
}

// One package's counter is another process's and the estimate cannot stand in (the other
// package is read): the total would leave a package out, so it is unknown with the reason.
TEST(Rapl, CounterNothingReplacesMakesTheTotalUnknown) {
  TempDir d;
  for (const char* z : {"intel-rapl:0", "intel-rapl:1"}) {
    fake_rapl_zone(d / "powercap", z, std::string("package-") + z[11], 1000000, std::nullopt);
  }
  MeterOptions o = rapl_options(d);
  OtherReader other(o.lock_dir, "rapl-intel-rapl:1");
  auto m = Meter::create(o);
  m->begin_window("w");
  set_rapl_uj(d.path, "powercap/intel-rapl:0", 3000000);
  auto r = m->end_window("w");
  EXPECT_FALSE(r.known_energy_j()) << r.energy_j;
  EXPECT_NE(r.energy_unknown_reason.find("rapl:package-1"), std::string::npos)
      << r.energy_unknown_reason;
  EXPECT_TRUE(to_json(r)["energy_j"].is_null());
}

}  // namespace gt::energy
