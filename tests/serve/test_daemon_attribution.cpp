// tests/serve/test_daemon_attribution.cpp: the node daemon in this process attributes a GPU's
// energy to the processes on it, on the stand-in NVML: by each process's utilization, or, on a
// GPU in MIG mode, by each instance's compute slices (tests/serve/test_daemon.cpp: meters through
// the daemon, clients, leases).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "energy/meter.h"
#include "serve/attribution.h"
#include "serve_test_util.h"

namespace gt::serve {
using namespace test;
using nlohmann::json;

namespace {

// A second process of this test's tree (it waits in pause()), killed and reaped when the test
// ends, however it ends (also when an ASSERT returns early).
struct PausedChild {
  pid_t pid = fork();
  PausedChild() {
    if (pid == 0)
      for (;;) pause();
  }
  ~PausedChild() {
    if (pid <= 0) return;  // fork failed: no kill(-1)
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  PausedChild(const PausedChild&) = delete;
  PausedChild& operator=(const PausedChild&) = delete;
};

// A daemon of the stand-in NVML's GPUs alone (GT_NVML_LIBRARY and its files set by the test)
// that samples only when asked, attributing by NVML's per-process utilization; and a raw client
// of it, closed with the object.
struct NvmlDaemon {
  LocalDaemon dm;
  int fd;
  static energy::SensorList nvml_sensors() {
    energy::MeterOptions mo;
    mo.use_daemon = mo.use_rapl = mo.use_estimate = mo.use_rocm_smi = false;
    return energy::detect_sensors(mo);
  }
  explicit NvmlDaemon(const std::string& dir)
      : dm(dir, nvml_sensors(), 30.0, {}, {}, {}, nvml_utilization()), fd(connect_raw(dm.socket)) {}
  ~NvmlDaemon() { ::close(fd); }
  NvmlDaemon(const NvmlDaemon&) = delete;
  NvmlDaemon& operator=(const NvmlDaemon&) = delete;
  // A fresh read and its answer, 0.16 s after the last (NVML is asked for utilization at most
  // every 0.15 s).
  json fresh() {
    std::this_thread::sleep_for(std::chrono::milliseconds(160));
    send_json(fd, fresh_read());
    return read_json(fd);
  }
};

}  // namespace

// Energy per process on a shared GPU, on the stand-in NVML: the counter and each process's
// utilization are scripted, so the shares can be computed by hand.
TEST(Daemon, GpuEnergyIsAttributedToProcessesByTheirUtilization) {
  TempDir d;
  energy::test::EnvGuard lib("GT_NVML_LIBRARY", GT_FAKE_NVML);
  energy::test::EnvGuard ef("FAKE_NVML_ENERGY_FILE", d / "energy");
  energy::test::EnvGuard uf("FAKE_NVML_PROC_UTIL_FILE", d / "util");
  energy::test::write_file(d / "energy", "0\n");
  energy::test::write_file(d / "util", "");
  const PausedChild child;  // a second process of this test's tree on the GPU
  const unsigned me = static_cast<unsigned>(getpid()), kid = static_cast<unsigned>(child.pid);
  {
    NvmlDaemon nd(d.path);
    const int fd = nd.fd;
    auto fresh = [&] { return nd.fresh(); };
    fresh();
    // 1000 J with this process at 30 % and the child at 50 %: 300 J, 500 J, 200 J idle
    energy::test::write_file(d / "util", fmt::format("0 {} 30\n0 {} 50\n", me, kid));
    energy::test::write_file(d / "energy", "1000000\n");  // mJ
    fresh();
    // 600 J at 80 % + 40 % (over 100 %): 400 J and 200 J, none idle
    energy::test::write_file(d / "util", fmt::format("0 {} 80\n0 {} 40\n", me, kid));
    energy::test::write_file(d / "energy", "1600000\n");
    fresh();
    send_json(fd, request("attribution"));  // scope: this process's tree
    json r = read_json(fd);
    ASSERT_TRUE(r["ok"].get<bool>()) << r;
    double mine = 0, kids = 0;
    for (const auto& p : r["processes"]) {
      if (p["pid"] == me) mine = p["energy_j"].get<double>();
      if (p["pid"] == kid) kids = p["energy_j"].get<double>();
    }
    EXPECT_NEAR(mine, 300 + 400, 1e-9);
    EXPECT_NEAR(kids, 500 + 200, 1e-9);
    EXPECT_NEAR(r["total_j"].get<double>(), 1400, 1e-9);
    ASSERT_EQ(r["gpus"].size(), 1u);
    EXPECT_NEAR(r["gpus"][0]["energy_j"].get<double>(), 1600, 1e-9);
    EXPECT_NEAR(r["gpus"][0]["unattributed_j"].get<double>(), 200, 1e-9);
    EXPECT_NE(r["method"].get<std::string>().find("attribution"), std::string::npos);
    // a cgroup's processes (a Slurm job's): this test's own cgroup holds both
    std::ifstream cgf("/proc/self/cgroup");
    std::string cg;
    for (std::string line; std::getline(cgf, line);)
      if (line.rfind("0::", 0) == 0) cg = line.substr(3);
    if (!cg.empty()) {
      send_json(fd, request("attribution", {{"cgroup", cg}}));
      r = read_json(fd);
      EXPECT_NEAR(r["total_j"].get<double>(), 1400, 1e-9) << r;
      send_json(fd, request("attribution", {{"cgroup", cg + "-no-such"}}));
      EXPECT_TRUE(read_json(fd)["processes"].empty());
    }
    // the child's tree only
    send_json(fd, request("attribution", {{"pid", kid}}));
    r = read_json(fd);
    ASSERT_EQ(r["processes"].size(), 1u) << r;
    EXPECT_NEAR(r["total_j"].get<double>(), 700, 1e-9);
    // NVML cannot say: nothing attributed, all of it unattributed, and said why
    {
      energy::test::EnvGuard rc("FAKE_NVML_PROC_UTIL_RC", "3");
      energy::test::write_file(d / "energy", "1700000\n");
      fresh();
    }
    send_json(fd, request("attribution"));
    r = read_json(fd);
    EXPECT_NEAR(r["total_j"].get<double>(), 1400, 1e-9);
    EXPECT_NEAR(r["gpus"][0]["unattributed_j"].get<double>(), 300, 1e-9);
    EXPECT_NE(r["gpus"][0]["note"].get<std::string>().find("Not Supported"), std::string::npos);
  }
}

// A GPU in MIG mode with two instances (3 and 4 compute slices): NVML has no per-process
// utilization there, so each instance gets its slices' share of the GPU's energy (3/7, 4/7),
// split equally among its processes; an instance with no process leaves its share unattributed.
TEST(Daemon, MigInstancesAreTheirOwnDevicesAndGetTheirSliceShare) {
  TempDir d;
  energy::test::EnvGuard lib("GT_NVML_LIBRARY", GT_FAKE_NVML);
  energy::test::EnvGuard ef("FAKE_NVML_ENERGY_FILE", d / "energy");
  energy::test::EnvGuard mig("FAKE_NVML_MIG", "MIG-aaaa@0/1/0/3,MIG-bbbb@0/2/0/4");
  energy::test::EnvGuard pf("FAKE_NVML_PROCS_FILE", d / "procs");
  energy::test::EnvGuard uf("FAKE_NVML_PROC_UTIL_FILE", d / "util");
  energy::test::write_file(d / "energy", "0\n");
  energy::test::write_file(d / "procs", "");
  const PausedChild child;
  const unsigned me = static_cast<unsigned>(getpid()), kid = static_cast<unsigned>(child.pid);
  {
    NvmlDaemon nd(d.path);
    const int fd = nd.fd;
    auto fresh = [&] { return nd.fresh(); };
    fresh();
    // 700 J; both processes on instance B (4/7: 400 J, 200 J each); A idle: 300 J unattributed.
    // NVML's per-process utilization (which MIG mode does not answer) would say otherwise.
    energy::test::write_file(d / "util", fmt::format("0 {} 90\n0 {} 5\n", me, kid));
    energy::test::write_file(d / "procs", fmt::format("MIG-bbbb {}\nMIG-bbbb {}\n", me, kid));
    energy::test::write_file(d / "energy", "700000\n");  // mJ
    fresh();
    // 1400 J; this process on A (3/7: 600 J), the child on B (4/7: 800 J)
    energy::test::write_file(d / "procs", fmt::format("MIG-aaaa {}\nMIG-bbbb {}\n", me, kid));
    energy::test::write_file(d / "energy", "2100000\n");
    fresh();
    send_json(fd, request("attribution"));
    json r = read_json(fd);
    ASSERT_TRUE(r["ok"].get<bool>()) << r;
    double mine = 0, kids = 0;
    std::string my_device, kid_device;
    for (const auto& p : r["processes"]) {
      if (p["pid"] == me) mine = p["energy_j"].get<double>(), my_device = p["mig_device"];
      if (p["pid"] == kid) kids = p["energy_j"].get<double>(), kid_device = p["mig_device"];
    }
    EXPECT_NEAR(mine, 200 + 600, 1e-9) << r;
    EXPECT_NEAR(kids, 200 + 800, 1e-9) << r;
    EXPECT_EQ(my_device.rfind("MIG-aaaa (GPU instance 1, compute instance 0, 3 slices)", 0), 0u);
    EXPECT_EQ(kid_device.rfind("MIG-bbbb (GPU instance 2", 0), 0u) << kid_device;
    ASSERT_EQ(r["gpus"].size(), 1u);
    const json& g = r["gpus"][0];
    EXPECT_NEAR(g["energy_j"].get<double>(), 2100, 1e-9);
    EXPECT_NEAR(g["attributed_j"].get<double>(), 1800, 1e-9);
    EXPECT_NEAR(g["unattributed_j"].get<double>(), 300, 1e-9);
    EXPECT_EQ(g["note"], "") << g;
    ASSERT_EQ(g["mig_instances"].size(), 2u) << g;
    double instances_j = 0;
    for (const auto& m : g["mig_instances"]) {
      const bool a = m["device"].get<std::string>().rfind("MIG-aaaa", 0) == 0;
      EXPECT_NEAR(m["energy_j"].get<double>(), a ? 300 + 600 : 400 + 800, 1e-9) << m;
      EXPECT_NEAR(m["attributed_j"].get<double>(), a ? 600 : 1200, 1e-9) << m;
      EXPECT_NEAR(m["unattributed_j"].get<double>(), a ? 300 : 0, 1e-9) << m;
      instances_j += m["energy_j"].get<double>();
    }
    EXPECT_NEAR(instances_j, 2100, 1e-9);  // the instances' shares add to the GPU's, no more
    EXPECT_NE(r["method"].get<std::string>().find("MIG"), std::string::npos);
  }
}

}  // namespace gt::serve
