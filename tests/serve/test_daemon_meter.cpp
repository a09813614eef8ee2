// tests/serve/test_daemon_meter.cpp: a Meter reading through the node daemon chooses its
// sensors as one reading directly does: the AMD GPUs this process sees (ROCR_VISIBLE_DEVICES,
// then HIP_VISIBLE_DEVICES) at MeterOptions::gpus's positions, an error or a flag for those it
// cannot read; and in a multi-rank job (node_devices_shared) one rank of the node counts the
// node's CPU and memory, the others leave them out.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "core/error.h"
#include "energy/meter.h"
#include "error_of.h"
#include "serve_test_util.h"

namespace gt::serve {
using namespace test;
using energy::test::EnvGuard;

namespace {

energy::MeterOptions through(const LocalDaemon& d, const std::string& lock_dir) {
  energy::MeterOptions o;
  o.interval_s = 0;
  o.daemon_socket = d.socket;
  o.lock_dir = lock_dir;
  o.use_rapl = o.use_estimate = false;
  return o;
}

// The counted GPU sensors of `m`: name and index (its position among the visible GPUs).
std::vector<std::pair<std::string, int>> counted_gpus(const energy::Meter& m) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& s : m.sensors())
    if (s.domain == "gpu" && s.available && s.counted) out.emplace_back(s.name, s.index);
  return out;
}

using gt::test::error_of;

// AMD GPUs 0..3 of ROCm SMI as the daemon reads them, `left_out` not among them; counters 0 J.
struct AmdGpus {
  std::vector<AtomicCounter*> gpu = std::vector<AtomicCounter*>(4, nullptr);
  energy::SensorList list;
  explicit AmdGpus(int left_out = -1) {
    for (int i = 0; i < 4; ++i) {
      if (i == left_out) continue;
      auto c = std::make_unique<AtomicCounter>(fmt::format("rocm:{}", i), "gpu",
                                               fmt::format("rocm-{}", i));
      gpu[static_cast<size_t>(i)] = c.get();
      list.push_back(std::move(c));
    }
  }
};

// The environment of a job given AMD GPUs 2 and 3 of the node, in HIP's order 2, 3 (as in
// RocmSmi.OnlyTheVisibleGpusInTheirOrder); no NVML can be loaded.
struct AmdJobEnv {
  EnvGuard lib{"GT_ROCM_SMI_LIBRARY", GT_FAKE_ROCM_SMI};  // GPU i's unique id: 0xA1B2C3D4000 + i
  EnvGuard rocr{"ROCR_VISIBLE_DEVICES", "3,1,GPU-a1b2c3d4002"};  // ROCm SMI GPUs 3, 1, 2
  EnvGuard hip{"HIP_VISIBLE_DEVICES", "2,0"};                    // of those: 2, then 3
  EnvGuard nvml{"GT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"};
};

}  // namespace

// The daemon path counted every AMD GPU of the node whatever the job saw and whatever
// MeterOptions::gpus asked for: now the visible ones, in HIP's order, at gpus's positions
// (an NVIDIA side with no GPU is passed over, as when reading directly).
TEST(DaemonMeter, AmdGpusAreThoseThisProcessSeesAtTheGpusPositions) {
  TempDir d;
  AmdJobEnv env;
  AmdGpus g;
  LocalDaemon dm(d.path, std::move(g.list), 10.0);
  energy::MeterOptions o = through(dm, d / "locks");
  auto all = energy::Meter::create(o);
  using Named = std::vector<std::pair<std::string, int>>;
  EXPECT_EQ(counted_gpus(*all), (Named{{"rocm:2", 0}, {"rocm:3", 1}}));
  o.gpus = std::vector<int>{1};
  auto one = energy::Meter::create(o);
  EXPECT_EQ(counted_gpus(*one), (Named{{"rocm:3", 1}}));
  all->begin_window("w");
  one->begin_window("w");
  for (int i = 0; i < 4; ++i) g.gpu[static_cast<size_t>(i)]->joules = 10.0 * (i + 1);
  EXPECT_DOUBLE_EQ(all->end_window("w").energy_j_of("gpu"), 30 + 40);
  EXPECT_DOUBLE_EQ(one->end_window("w").energy_j_of("gpu"), 40);
  // a position that is not a visible AMD GPU: an error naming it, as when reading directly
  o.gpus = std::vector<int>{2};
  o.gpus_strict = false;
  const std::string err = error_of([&] { energy::Meter::create(o); });
  EXPECT_NE(err.find("gpus: 2 is not a visible AMD GPU"), std::string::npos) << err;
}

// A visible GPU the daemon does not read, asked for by position: an error with gpus_strict,
// else a flag on every measurement naming it (its energy is not in the figures).
TEST(DaemonMeter, AnAmdGpuAskedForThatTheDaemonCannotReadIsAnErrorOrAFlag) {
  TempDir d;
  AmdJobEnv env;
  AmdGpus g(/*left_out=*/2);  // position 0 of this job
  LocalDaemon dm(d.path, std::move(g.list), 10.0);
  energy::MeterOptions o = through(dm, d / "locks");
  o.gpus = std::vector<int>{0};
  const std::string err = error_of([&] { energy::Meter::create(o); });
  EXPECT_NE(err.find("GPU 0 (rocm:2) cannot be read"), std::string::npos) << err;
  o.gpus = std::vector<int>{0, 1};
  o.gpus_strict = false;
  auto m = energy::Meter::create(o);
  EXPECT_EQ(counted_gpus(*m), (std::vector<std::pair<std::string, int>>{{"rocm:3", 1}}));
  m->begin_window("w");
  g.gpu[3]->joules = 5;
  const auto r = m->end_window("w");
  EXPECT_DOUBLE_EQ(r.energy_j_of("gpu"), 5);
  std::string flags;
  for (const auto& f : r.flags) flags += f + "\n";
  EXPECT_NE(flags.find("gpus [0, 1] asked for but not measured: GPU 0 (rocm:2) cannot be read"),
            std::string::npos)
      << flags;
}

// The daemon path resolved ROCR_VISIBLE_DEVICES against the daemon's highest AMD GPU, not the
// node's count: a daemon that reads GPUs 0..2 of the node's 4 (its own environment narrowed,
// say) ended this job's list at its entry 3, and the job measured no GPU. Hello tells the
// node's count now: the job sees GPUs 2 and 3 in HIP's order, as when reading directly, GPU 3
// there and not read. A hello without the count (an older daemon) is read as before.
TEST(DaemonMeter, AmdGpusAreResolvedAgainstTheNodesCountThatHelloTells) {
  TempDir d;
  AmdJobEnv env;  // ROCm SMI GPUs 3, 1, 2; of those 2, then 3
  using Named = std::vector<std::pair<std::string, int>>;
  {
    AmdGpus g(/*left_out=*/3);
    LocalDaemon dm(d.path, std::move(g.list), 10.0, {}, {}, {}, nullptr, true,
                   /*node_amd_gpus=*/4u);
    energy::MeterOptions o = through(dm, d / "locks");
    auto all = energy::Meter::create(o);
    EXPECT_EQ(counted_gpus(*all), (Named{{"rocm:2", 0}}));
    all->begin_window("w");
    g.gpu[2]->joules = 30;
    EXPECT_DOUBLE_EQ(all->end_window("w").energy_j_of("gpu"), 30);
    // the job's GPU 1 is the node's GPU 3: visible, and one the daemon does not read
    o.gpus = std::vector<int>{1};
    const std::string err = error_of([&] { energy::Meter::create(o); });
    EXPECT_NE(err.find("GPU 1 (rocm:3) cannot be read"), std::string::npos) << err;
  }
  {
    AmdGpus g(/*left_out=*/3);
    LocalDaemon dm(d.path, std::move(g.list), 10.0);  // no node_gpus in its hello
    auto m = energy::Meter::create(through(dm, d / "locks"));
    EXPECT_TRUE(counted_gpus(*m).empty());
    std::string reasons;
    for (const auto& s : m->sensors())
      if (s.domain == "gpu") reasons += s.name + ": " + s.reason + "\n";
    EXPECT_NE(reasons.find("ROCR_VISIBLE_DEVICES entry '3' matches no visible AMD GPU (expected "
                           "an index below 3"),
              std::string::npos)
        << reasons;
  }
}

// Through the daemon every rank of a multi-rank job counted the node's CPU (the job's energy
// had it once per rank). As when they read directly, the first rank to take its lock counts
// it and the others leave it out: no estimate in its stead, the window known, their own GPU in
// it. A process that is not such a rank still gets the whole node's figures.
TEST(DaemonMeter, OneRankOfAJobCountsTheNodesCpu) {
  TempDir d;
  EnvGuard locks("GT_ENERGY_LOCK_DIR", d / "daemon-locks");
  EnvGuard nvml("GT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");  // the daemon's order
  energy::SensorList sensors;
  auto cpu = std::make_unique<AtomicCounter>("rapl:package-0", "cpu", "rapl-intel-rapl:0");
  auto gpu = std::make_unique<AtomicCounter>("nvml:0", "gpu", "nvml-GPU-0001");
  AtomicCounter* c = cpu.get();
  AtomicCounter* g = gpu.get();
  sensors.push_back(std::move(cpu));
  sensors.push_back(std::move(gpu));
  LocalDaemon dm(d.path, std::move(sensors), 10.0);
  energy::MeterOptions o = through(dm, d / "locks");
  o.use_rapl = o.use_estimate = true;
  o.use_rocm_smi = false;
  o.node_devices_shared = true;
  int ready[2], stop[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(stop), 0);
  const pid_t other = fork();  // the rank that started first
  if (other == 0) {
    char ok = 'n';
    try {
      auto m = energy::Meter::create(o);
      ok = m->not_reader().empty() && m->reading_source() != "direct" ? 'y' : 'n';
      (void)!write(ready[1], &ok, 1);
      (void)!read(stop[0], &ok, 1);
    } catch (...) {
      (void)!write(ready[1], &ok, 1);
    }
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  EXPECT_EQ(ok, 'y') << "the first rank counts the node's CPU";
  auto rank = energy::Meter::create(o);
  auto alone = energy::Meter::create([&] {
    energy::MeterOptions a = o;
    a.node_devices_shared = false;
    return a;
  }());
  EXPECT_EQ(rank->not_reader(), std::vector<std::string>{"rapl:package-0"});
  EXPECT_TRUE(alone->not_reader().empty());
  rank->begin_window("w");
  alone->begin_window("w");
  c->joules = 100;
  g->joules = 7;
  const auto r = rank->end_window("w");
  const auto a = alone->end_window("w");
  ASSERT_TRUE(r.known_energy_j()) << r.energy_unknown_reason;
  EXPECT_DOUBLE_EQ(*r.known_energy_j(), 7);  // its own GPU: the CPU is the other rank's
  for (const auto& x : r.domains) EXPECT_EQ(x.domain, "gpu") << x.sensor;
  std::string flags;
  for (const auto& f : r.flags) flags += f + "\n";
  EXPECT_NE(flags.find("not the reader: process " + std::to_string(other)), std::string::npos)
      << flags;
  EXPECT_DOUBLE_EQ(a.energy_j, 107);  // not a rank of a job: the node's figures
  // the first rank ends: a rank that starts now is the one that counts the CPU
  (void)!write(stop[1], "x", 1);
  waitpid(other, nullptr, 0);
  rank.reset();
  auto next = energy::Meter::create(o);
  EXPECT_TRUE(next->not_reader().empty());
  next->begin_window("w");
  c->joules = 150;
  EXPECT_DOUBLE_EQ(next->end_window("w").energy_j_of("cpu"), 50);
  for (int fd : {ready[0], ready[1], stop[0], stop[1]}) close(fd);
}

}  // namespace gt::serve
