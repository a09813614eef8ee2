// tests/energy/cpu_power_test.cpp: the CPU power figure of the estimate (cpu_power_table.h):
// datasheet rows, the virtual-machine scaling by logical CPUs, the user's override, and a
// /proc/cpuinfo injected from a file.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

#include "energy/cpu_estimate.h"
#include "energy/cpu_power_table.h"
#include "test_util.h"

namespace gt::energy {
using namespace test;

namespace {

// /proc/cpuinfo of n logical CPUs.
std::string cpuinfo(int n, const std::string& vendor, const std::string& model_name, int family,
                    int model, bool hypervisor, int sockets = 1, int stepping = 1) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += "processor\t: " + std::to_string(i) + "\nvendor_id\t: " + vendor +
         "\ncpu family\t: " + std::to_string(family) + "\nmodel\t\t: " + std::to_string(model) +
         "\nmodel name\t: " + model_name + "\nstepping\t: " + std::to_string(stepping) +
         "\nphysical id\t: " + std::to_string(i % sockets) + "\nflags\t\t: fpu vme avx2" +
         (hypervisor ? " hypervisor" : "") + " avx512f\n\n";
  return s;
}

// A fake /proc with the given cpuinfo; /proc/stat goes from idle to fully busy so that the
// estimate's power is its full-load figure.
struct FakeProc {
  TempDir d;
  explicit FakeProc(const std::string& info) {
    write_file(d / "cpuinfo", info);
    write_file(d / "meminfo", "MemTotal:        8000000 kB\n");
    for (size_t at = 0; (at = info.find("processor", at)) != std::string::npos; ++at)
      cpu_lines += "cpu" + std::to_string(ncpu++) + " 0 0 0 0 0 0 0 0\n";
    write_file(d / "stat", "cpu  0 0 0 100000 0 0 0 0\n" + cpu_lines);
  }
  // Full-load power (W) and method of the estimate. The estimate is read as cumulative joules
  // (TDP x busy CPU-seconds / CPUs): all CPUs busy for `s` seconds give full-load W x s.
  std::pair<double, std::string> full_load(std::optional<double> tdp_w = {}) {
    CpuEstimateOptions o;
    o.proc_root = d.path;
    o.tdp_w = tdp_w;
    auto s = make_cpu_estimate(o);
    auto r0 = s[0]->read(0);
    const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    const double busy = 1000 * hz * ncpu;  // 1000 s of every CPU
    write_file(d / "stat", fmt::format("cpu  {} 0 0 100000 0 0 0 0\n", busy) + cpu_lines);
    auto r = s[0]->read(0);
    EXPECT_TRUE(r0.ok && r.ok) << r0.error << r.error;
    if (!r0.energy_j || !r.energy_j) return {-1, s[0]->info().method};
    return {(*r.energy_j - *r0.energy_j) / 1000, s[0]->info().method};
  }
  // The machine's estimates (CPU, memory) with /proc/meminfo's MemTotal line set to `mem_total`.
  SensorList estimates_with_mem_total(const std::string& mem_total) {
    write_file(d / "meminfo", "MemTotal:        " + mem_total + "\n");
    CpuEstimateOptions o;
    o.proc_root = d.path;
    return make_cpu_estimate(o);
  }
  std::string cpu_lines;
  int ncpu = 0;
};

}  // namespace

// Issue 12, part 7: 2 virtual CPUs of an AMD EPYC (model string "AMD EPYC", family 25 model 17:
// Genoa), hypervisor flag set. Before: 85 W for the whole socket. Now 2 x 360 W / 192 threads.
TEST(CpuPower, VirtualMachineScalesByItsLogicalCpus) {
  FakeProc p(cpuinfo(2, "AuthenticAMD", "AMD EPYC", 25, 17, true));
  auto [w, method] = p.full_load();
  EXPECT_NEAR(w, 2 * 360.0 / 192, 1e-9);
  EXPECT_NE(method.find("virtual machine (hypervisor flag in /proc/cpuinfo)"), std::string::npos)
      << method;
  EXPECT_NE(method.find("2 logical CPU(s) x 1.875 W per thread"), std::string::npos) << method;
  EXPECT_NE(method.find("AMD EPYC 9004 (Genoa) from CPU family 25 model 17"), std::string::npos)
      << method;
  EXPECT_NE(method.find("EPYC 9654 360 W / 192 threads, amd.com product page"), std::string::npos)
      << method;
}

TEST(CpuPower, VirtualMachineWithAModelNumberUsesThatPart) {
  FakeProc p(
      cpuinfo(8, "GenuineIntel", "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", 6, 106, true));
  auto [w, method] = p.full_load();
  EXPECT_NEAR(w, 8 * 270.0 / 80, 1e-9);
  EXPECT_NE(method.find("Platinum 8380 270 W / 80 threads, ark.intel.com"), std::string::npos)
      << method;
}

TEST(CpuPower, UnknownPartOnAVirtualMachineGetsTheStatedDefaultPerThread) {
  FakeProc p(cpuinfo(4, "SomeVendor", "Virtual CPU", 1, 1, true));
  auto [w, method] = p.full_load();
  EXPECT_NEAR(w, 4 * default_w_per_thread(), 1e-9);
  EXPECT_GT(default_w_per_thread(), 1.0);
  EXPECT_LT(default_w_per_thread(), 8.0);
  EXPECT_NE(method.find("default, the median W per thread of the table's server rows"),
            std::string::npos)
      << method;
}

TEST(CpuPower, PhysicalMachineCountsWholeSockets) {
  FakeProc p(cpuinfo(256, "AuthenticAMD", "AMD EPYC 7763 64-Core Processor", 25, 1, false, 2));
  auto [w, method] = p.full_load();
  EXPECT_NEAR(w, 2 * 280.0, 1e-9);
  EXPECT_EQ(method.find("virtual"), std::string::npos) << method;
  FakeProc q(cpuinfo(4, "GenuineIntel", "Some Desktop CPU", 6, 1, false));
  EXPECT_NEAR(q.full_load().first, kDefaultTdpW, 1e-9);
}

TEST(CpuPower, ConfiguredTdpStaysTheUsersOverride) {
  FakeProc p(cpuinfo(2, "AuthenticAMD", "AMD EPYC", 25, 17, true));
  auto [w, method] = p.full_load(50.0);
  EXPECT_NEAR(w, 50.0, 1e-9);
  EXPECT_NE(method.find("given by configuration"), std::string::npos) << method;
}

TEST(CpuPower, ModelNamesMatchWholeWords) {
  auto name = [](const std::string& m) {
    auto p = find_cpu_part(m);
    return p ? std::string(p->name) : std::string("-");
  };
  EXPECT_EQ(name("Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz"), "Gold 6248R");
  EXPECT_EQ(name("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz"), "Gold 6248");
  EXPECT_EQ(name("AMD EPYC 7543P 32-Core Processor"), "EPYC 7543");
  EXPECT_EQ(name("Intel(R) Xeon(R) Platinum 8480+"), "Platinum 8480+");
  EXPECT_EQ(name("Intel(R) Xeon(R) Platinum 8460Y+"), "Platinum 8460Y+");
  EXPECT_EQ(name("Intel(R) Xeon(R) 6980P"), "6980P");
  EXPECT_EQ(name("AMD EPYC 96540"), "-");
  EXPECT_EQ(name("AMD EPYC"), "-");
}

TEST(CpuPower, TableCoversTheServerGenerationsAndIsConsistent) {
  std::set<std::string> gens;
  for (const auto& p : cpu_parts()) {
    EXPECT_GT(p.tdp_w, 0) << p.name;
    EXPECT_GE(p.threads, p.cores) << p.name;
    EXPECT_LE(p.threads, 2 * p.cores) << p.name;
    EXPECT_NE(std::string(p.source), "") << p.name;
    gens.insert(p.generation);
  }
  for (auto g :
       {"AMD EPYC 7002 (Rome)", "AMD EPYC 7003 (Milan)", "AMD EPYC 9004 (Genoa)",
        "AMD EPYC 9005 (Turin)", "Intel Xeon Scalable 1st gen (Skylake-SP)",
        "Intel Xeon Scalable 2nd gen (Cascade Lake)", "Intel Xeon Scalable 3rd gen (Ice Lake-SP)",
        "Intel Xeon Scalable 4th gen (Sapphire Rapids)",
        "Intel Xeon Scalable 5th gen (Emerald Rapids)", "Intel Xeon 6 (Granite Rapids, P-cores)"})
    EXPECT_TRUE(gens.count(g)) << g;
  // Each generation found from family/model numbers has a part in the table.
  CpuInfo c;
  c.vendor = "GenuineIntel";
  c.family = 6;
  for (int m : {0x6A, 0x8F, 0xCF, 0xAD, 0xAF}) {
    c.model = m;
    EXPECT_TRUE(generation_part(c)) << m;
  }
}

TEST(CpuPower, CpuinfoFieldThatIsNotANumberIsNamed) {
  auto c = parse_cpuinfo(
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: twenty\n"
      "flags\t\t: hypervisor\n",
      "/proc/cpuinfo");
  EXPECT_EQ(c.family, -1);
  EXPECT_TRUE(c.hypervisor);
  EXPECT_EQ(c.logical_cpus, 1);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0],
            "/proc/cpuinfo:3: cpu family: 'twenty' is not an integer; expected a "
            "whole number");
}

// The RAM estimate is CodeCarbon's 3 W per 8 GB with its GB of 2^30 bytes: 8 GiB installed is
// 3 W (it was 3.22 W, with 10^9-byte GB).
TEST(CpuPower, EightGibOfRamIsThreeWattsAsInCodeCarbon) {
  FakeProc p(cpuinfo(2, "AuthenticAMD", "AMD EPYC", 25, 17, true));
  auto s = p.estimates_with_mem_total("8388608 kB");
  ASSERT_EQ(s.size(), 2u);
  const Reading r = s[1]->read(0);
  ASSERT_TRUE(r.ok && r.power_w) << r.error;
  EXPECT_DOUBLE_EQ(*r.power_w, 3.0);
  EXPECT_NE(s[1]->info().method.find("8.0 GiB installed"), std::string::npos)
      << s[1]->info().method;
}

// Issue 12, part 8 (the same kind): an unreadable MemTotal made the machine's RAM estimate 0 W
// without a word. It is unavailable, with the file and value named.
TEST(CpuPower, MemTotalThatIsNotANumberMakesTheRamEstimateUnavailable) {
  FakeProc p(cpuinfo(2, "AuthenticAMD", "AMD EPYC", 25, 17, true));
  auto s = p.estimates_with_mem_total("lots kB");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_FALSE(s[1]->info().available);
  EXPECT_NE(s[1]->info().reason.find("meminfo: MemTotal: 'lots' is not a number"),
            std::string::npos)
      << s[1]->info().reason;
}

}  // namespace gt::energy
