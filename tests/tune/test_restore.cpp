// Restoration of power limits on every exit path, on a fake powercap RAPL tree (files, so a
// forked child's changes are visible to the test) and on the stand-in NVML library (which
// logs every set call): normal exit, exception, SIGTERM, SIGINT, a chained handler, and the
// train-side apply_power_limit().
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tune/power_limit.h"
#include "tune/rapl_device.h"
#include "tune/simulated.h"
#include "tune/tuner.h"

using namespace gt::tune;
namespace fs = std::filesystem;

namespace {

struct FakePowercap {
  fs::path root;
  fs::path limit;
  FakePowercap() {
    std::string t = (fs::temp_directory_path() / "gt_tune_powercap_XXXXXX").string();
    root = ::mkdtemp(t.data());
    fs::create_directories(root / "intel-rapl:0");
    fs::create_directories(root / "intel-rapl:0:0");  // a sub-zone: not a package
    std::ofstream(root / "intel-rapl:0" / "name") << "package-0\n";
    std::ofstream(root / "intel-rapl:0" / "constraint_0_max_power_uw") << "200000000\n";
    limit = root / "intel-rapl:0" / "constraint_0_power_limit_uw";
    std::ofstream(limit) << "150000000\n";
    std::ofstream(root / "intel-rapl:0:0" / "constraint_0_power_limit_uw") << "1\n";
  }
  ~FakePowercap() { fs::remove_all(root); }
  long long limit_uw() const {
    std::ifstream in(limit);
    long long v = -1;
    in >> v;
    return v;
  }
};

// Runs body in a child that reports "ready" through a pipe, then sends sig (0: none) and
// returns the wait status.
template <class F>
int run_child(F body, int sig) {
  int fd[2];
  EXPECT_EQ(::pipe(fd), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fd[0]);
    body(fd[1]);
    ::_exit(99);  // body must exit or be killed
  }
  ::close(fd[1]);
  char c = 0;
  EXPECT_EQ(::read(fd[0], &c, 1), 1) << "child did not get ready";
  ::close(fd[0]);
  if (sig) ::kill(pid, sig);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

void ready(int fd) {
  char c = 'r';
  if (::write(fd, &c, 1) != 1) ::_exit(98);
}

}  // namespace

TEST(TuneRapl, OpensPackageZonesWithTheirRange) {
  FakePowercap pc;
  auto devs = open_rapl_devices(pc.root.string());
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0]->name(), "rapl:intel-rapl:0 (package-0)");
  EXPECT_DOUBLE_EQ(devs[0]->limit_w(), 150);
  EXPECT_DOUBLE_EQ(devs[0]->max_limit_w(), 200);
  EXPECT_DOUBLE_EQ(devs[0]->min_limit_w(), 50);  // a quarter of the max without a min file
  EXPECT_EQ(devs[0]->permission_problem(), "");
  devs[0]->set_limit_w(120.5);
  EXPECT_EQ(pc.limit_uw(), 120500000);
}

// Issue 12, part 4: only CPU package zones are capping devices. With package-0 and psys in the
// tree, psys is never listed, never set, and P_max is the package's alone.
TEST(TuneRapl, PsysAndOtherZonesAreNeverPowerLimitDevices) {
  FakePowercap pc;
  for (auto [z, name] : {std::pair{"intel-rapl:1", "psys"},
                         {"intel-rapl:2", "mystery"},
                         {"intel-rapl:0:1", "package-0-die-1"}}) {
    fs::create_directories(pc.root / z);
    std::ofstream(pc.root / z / "name") << name << "\n";
    std::ofstream(pc.root / z / "constraint_0_max_power_uw") << "200000000\n";
    std::ofstream(pc.root / z / "constraint_0_power_limit_uw") << "180000000\n";
  }
  auto untouched = [&] {
    for (auto z : {"intel-rapl:1", "intel-rapl:2", "intel-rapl:0:1"}) {
      std::ifstream in(pc.root / z / "constraint_0_power_limit_uw");
      std::string v;
      in >> v;
      if (v != "180000000") return false;
    }
    return true;
  };
  auto devs = open_power_limit_devices("rapl", pc.root.string());
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0]->name(), "rapl:intel-rapl:0 (package-0)");
  TuneOptions opt;
  opt.step_w = 50;
  std::vector<double> seen;
  auto profile = [&](int steps) {
    seen.push_back(devs[0]->limit_w());
    EXPECT_TRUE(untouched());
    StepMeasurement m;
    m.energy_j = static_cast<double>(steps);
    m.time_s = static_cast<double>(steps);
    return m;
  };
  auto r = tune_power_limit(devs, profile, opt);
  EXPECT_DOUBLE_EQ(r.p_max_w, 200);  // not 400: psys is not summed in
  EXPECT_EQ(r.devices.size(), 1u);
  EXPECT_TRUE(untouched());
  ::setenv("GT_POWERCAP_ROOT", pc.root.c_str(), 1);
  {
    auto g = apply_power_limit(60, "rapl");  // train.power_limit=60
    EXPECT_EQ(pc.limit_uw(), 60000000);
    EXPECT_TRUE(untouched());
  }
  ::unsetenv("GT_POWERCAP_ROOT");
  EXPECT_EQ(pc.limit_uw(), 150000000);
}

TEST(TuneRapl, LimitFileThatIsNotANumberIsNamed) {
  FakePowercap pc;
  std::ofstream(pc.limit) << "150000000 W\n";
  try {
    open_rapl_devices(pc.root.string());
    FAIL();
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("constraint_0_power_limit_uw: '150000000 W' is not an "
                                         "integer"),
              std::string::npos)
        << e.what();
  }
}

TEST(TuneRapl, RefusesWithoutWriteAccess) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: file modes do not stop root";
  FakePowercap pc;
  fs::permissions(pc.limit, fs::perms::owner_read);
  auto devs = open_rapl_devices(pc.root.string());
  try {
    PowerLimitGuard g(devs);
    FAIL();
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("run as root"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pc.limit_uw(), 150000000);
}

TEST(TuneRestore, AfterNormalExitOfTheProcess) {
  FakePowercap pc;
  int status = run_child(
      [&](int fd) {
        // Leaked on purpose: only std::exit's atexit handler can restore it.
        auto* g = new PowerLimitGuard(open_rapl_devices(pc.root.string()));
        g->apply_w(100);
        ready(fd);
        std::exit(143);  // as the trainer does after a checkpoint
      },
      0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  EXPECT_EQ(pc.limit_uw(), 150000000);
}

TEST(TuneRestore, AfterAnException) {
  FakePowercap pc;
  try {
    PowerLimitGuard g(open_rapl_devices(pc.root.string()));
    g.apply_w(75);
    EXPECT_EQ(pc.limit_uw(), 75000000);
    throw std::runtime_error("step failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(pc.limit_uw(), 150000000);
}

TEST(TuneRestore, AfterSigtermAndSigint) {
  for (int sig : {SIGTERM, SIGINT}) {
    FakePowercap pc;
    int status = run_child(
        [&](int fd) {
          PowerLimitGuard g(open_rapl_devices(pc.root.string()));
          g.apply_w(100);
          ready(fd);
          for (;;) ::pause();
        },
        sig);
    // The handler restored the limit, then the default action ended the child by the signal.
    ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_EQ(pc.limit_uw(), 150000000) << strsignal(sig);
  }
}

TEST(TuneRestore, SigtermDuringTheSearch) {
  FakePowercap pc;
  int status = run_child(
      [&](int fd) {
        int calls = 0;
        ProfileFn slow = [&](int) -> StepMeasurement {
          if (++calls == 4) {  // the second limit (175 W)
            ready(fd);
            for (;;) ::pause();
          }
          StepMeasurement m;
          m.energy_j = m.time_s = 1.0;
          return m;
        };
        tune_power_limit(open_rapl_devices(pc.root.string()), slow, TuneOptions{});
      },
      SIGTERM);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(pc.limit_uw(), 150000000);
}

// Issue 31 §3: a forked child of the process that set the limit (a worker ended by SIGTERM, one
// that exits normally, one whose guard copy is destroyed) leaves the limit in force; the parent's
// own restore still works.
TEST(TuneRestore, ForkedChildrenLeaveTheParentsLimit) {
  FakePowercap pc;
  int status = run_child(
      [&](int fd) {
        PowerLimitGuard g(open_rapl_devices(pc.root.string()));  // handles SIGINT/SIGTERM
        g.apply_w(100);
        auto child = [](auto body) {
          pid_t pid = ::fork();
          if (pid == 0) body();
          return pid;
        };
        // 1: killed by SIGTERM (the handler runs in the child, then the default action)
        pid_t a = child([] {
          for (;;) ::pause();
        });
        ::usleep(100000);
        ::kill(a, SIGTERM);
        int st = 0;
        ::waitpid(a, &st, 0);
        if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM) ::_exit(10);
        // 2: a normal exit (atexit runs there)
        pid_t b = child([] { std::exit(0); });
        ::waitpid(b, &st, 0);
        // 3: the child's copy of the guard is destroyed (a finalizer) and it calls restore()
        pid_t c = child([&g] {
          g.restore();
          g.~PowerLimitGuard();
          ::_exit(0);
        });
        ::waitpid(c, &st, 0);
        std::ifstream in(pc.limit);
        long long uw = 0;
        in >> uw;
        if (uw != 100000000) ::_exit(20);  // a child undid the parent's limit
        ready(fd);
        ::_exit(0);  // leaves the guard for the test to check below
      },
      0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: the child was not ended by SIGTERM; 20: a child "
                                       "restored the parent's limit";
  EXPECT_EQ(pc.limit_uw(), 100000000);  // _exit: no restore anywhere (what SIGKILL leaves)
}

namespace {
volatile sig_atomic_t g_trainer_saw_sigterm = 0;
}

TEST(TuneRestore, SignalIsHandedOnToTheTrainersHandler) {
  FakePowercap pc;
  struct sigaction sa {
  }, old{};
  sa.sa_handler = [](int) { g_trainer_saw_sigterm = 1; };
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &old);
  {
    PowerLimitGuard g(open_rapl_devices(pc.root.string()));
    g.apply_w(100);
    ::raise(SIGTERM);
    EXPECT_EQ(g_trainer_saw_sigterm, 1);
    EXPECT_EQ(pc.limit_uw(), 150000000);
  }
  // The guard put the trainer's handler back when it ended.
  struct sigaction now {};
  ::sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, sa.sa_handler);
  ::sigaction(SIGTERM, &old, nullptr);
}

TEST(TuneRestore, ApplyPowerLimitForTrain) {
  FakePowercap pc;
  ::setenv("GT_POWERCAP_ROOT", pc.root.c_str(), 1);
  {
    auto g = apply_power_limit(120, "rapl");
    EXPECT_EQ(pc.limit_uw(), 120000000);
    EXPECT_DOUBLE_EQ(g->saved_limits_w().at(0), 150);
    EXPECT_THROW(apply_power_limit(500, "rapl"), gt::Error);  // out of range: nothing set
    EXPECT_EQ(pc.limit_uw(), 120000000);
  }
  EXPECT_EQ(pc.limit_uw(), 150000000);
  ::unsetenv("GT_POWERCAP_ROOT");
  EXPECT_THROW(apply_power_limit(120, "bogus"), gt::Error);
}

#ifdef GT_FAKE_NVML_PATH
namespace {
struct FakeNvmlEnv {
  fs::path dir;
  FakeNvmlEnv() {
    std::string t = (fs::temp_directory_path() / "gt_tune_nvml_XXXXXX").string();
    dir = ::mkdtemp(t.data());
    ::setenv("GT_NVML_LIBRARY", GT_FAKE_NVML_PATH, 1);
    ::setenv("FAKE_NVML_DEVICES", "2", 1);
    ::setenv("FAKE_NVML_SET_LOG", (dir / "set.log").c_str(), 1);
    ::setenv("FAKE_NVML_LIMIT_FILE", (dir / "limits").c_str(), 1);
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    ::unsetenv("FAKE_NVML_SET_RC");
  }
  ~FakeNvmlEnv() {
    for (const char* k : {"GT_NVML_LIBRARY", "FAKE_NVML_DEVICES", "FAKE_NVML_SET_LOG",
                          "FAKE_NVML_LIMIT_FILE", "FAKE_NVML_SET_RC", "FAKE_NVML_LIMIT_MW"})
      ::unsetenv(k);
    fs::remove_all(dir);
  }
  std::vector<std::string> sets() const {  // "<index> <mW> <rc>" lines
    std::ifstream in(dir / "set.log");
    std::vector<std::string> v;
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  }
};
}  // namespace

TEST(TuneNvml, SigtermRestoresEveryGpuAndTheLibraryLogsEachSet) {
  FakeNvmlEnv env;
  auto devs = open_power_limit_devices("nvml");
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_DOUBLE_EQ(devs[0]->limit_w(), 300);
  EXPECT_DOUBLE_EQ(devs[0]->min_limit_w(), 100);
  EXPECT_DOUBLE_EQ(devs[0]->max_limit_w(), 400);
  int status = run_child(
      [&](int fd) {
        PowerLimitGuard g(open_power_limit_devices("nvml"));
        g.apply_w(200);
        ready(fd);
        for (;;) ::pause();
      },
      SIGTERM);
  ASSERT_TRUE(WIFSIGNALED(status));
  // Permission probes (the limit set to itself), the 200-W sets, then the restoration.
  auto s = env.sets();
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0], "0 300000 0");
  EXPECT_EQ(s[1], "1 300000 0");
  EXPECT_EQ(s[2], "0 200000 0");
  EXPECT_EQ(s[3], "1 200000 0");
  EXPECT_EQ(s[4], "0 300000 0");
  EXPECT_EQ(s[5], "1 300000 0");
}

// Issue 31 §7: NVML is reference counted (the NVML API reference, nvmlShutdown): a user that
// shuts down leaves the library to the others. The stand-in was not, so `tune --devices nvml`,
// where the meter and the search each open NVML, failed to read the power limit once one of
// them let go ("Invalid Argument"). A stand-in behaves like what it stands for.
TEST(TuneNvml, ShutdownOfOneUserLeavesTheLibraryToTheOthers) {
  FakeNvmlEnv env;
  auto devs = open_power_limit_devices("nvml");
  { auto other = open_power_limit_devices("nvml"); }  // init, then its shutdown
  EXPECT_DOUBLE_EQ(devs[0]->limit_w(), 300);
  EXPECT_NO_THROW(devs[1]->set_limit_w(250));
  EXPECT_DOUBLE_EQ(devs[1]->limit_w(), 250);
  devs[1]->set_limit_w(300);
}

TEST(TuneNvml, RefusesWithoutPermissionNeverHalfApplies) {
  FakeNvmlEnv env;
  ::setenv("FAKE_NVML_SET_RC", "4", 1);  // NVML_ERROR_NO_PERMISSION
  auto devs = open_power_limit_devices("nvml");
  try {
    PowerLimitGuard g(devs);
    FAIL();
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("run as root"), std::string::npos) << e.what();
  }
  for (const auto& l : env.sets()) EXPECT_EQ(l.substr(l.size() - 2), " 4") << l;
  ::unsetenv("FAKE_NVML_SET_RC");
  EXPECT_DOUBLE_EQ(devs[0]->limit_w(), 300);
  EXPECT_DOUBLE_EQ(devs[1]->limit_w(), 300);
}
// Issue 12, part 8: a GPU whose current limit (90 W) is below its allowed minimum (100 W): NVML
// answers Invalid Argument to any attempt to set it back. That is not a permission problem.
TEST(TuneNvml, LimitBelowTheMinimumIsNotCalledAPermissionProblem) {
  FakeNvmlEnv env;
  ::setenv("FAKE_NVML_LIMIT_MW", "90000", 1);
  auto devs = open_power_limit_devices("nvml");
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_DOUBLE_EQ(devs[0]->limit_w(), 90);
  try {
    PowerLimitGuard g(devs);
    FAIL();
  } catch (const gt::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find("not permitted"), std::string::npos) << m;
    EXPECT_EQ(m.find("root"), std::string::npos) << m;
    EXPECT_NE(m.find("its current power limit 90 W lies below its allowed range [100, 400] W"),
              std::string::npos)
        << m;
  }
  EXPECT_TRUE(env.sets().empty());  // nothing was set, not even a probe
}

TEST(TuneNvml, NoVisibleGpuSaysWhichEntryMatchedNothing) {
  FakeNvmlEnv env;
  ::setenv("CUDA_VISIBLE_DEVICES", "99999999999999999999", 1);
  try {
    open_power_limit_devices("nvml");
    FAIL();
  } catch (const gt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'99999999999999999999' matches no NVML device"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("CUDA_VISIBLE_DEVICES");
}
#endif
