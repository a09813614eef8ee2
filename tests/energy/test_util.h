// tests/energy/test_util.h: helpers shared by the energy tests (and the serve, engine and
// report tests that read a stand-in node): a temporary folder, a manual clock, a scripted
// sensor, environment guards, a stand-in powercap (RAPL) tree and a stand-in /proc.
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "energy/meter.h"
#include "energy/node_lock.h"
#include "energy/sensor.h"

namespace gt::energy::test {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gt_energy_test_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path, std::filesystem::perms::all, ec);
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& rel) const { return path + "/" + rel; }
};

inline void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::trunc) << text;
}

/// Replaces the file at `path` with `text` in one step (written beside it, then renamed), so
/// that a process reading it meanwhile (a daemon's sampling thread) sees the old text or the
/// new, never an empty file (write_file truncates first).
inline void write_file_atomic(const std::string& path, const std::string& text) {
  write_file(path + ".tmp", text);
  std::filesystem::rename(path + ".tmp", path);
}

/// Sets `root`/`zone`/energy_uj (a powercap zone's counter, µJ; zone as "intel-rapl:0").
inline void set_rapl_uj(const std::string& root, const std::string& zone, unsigned long long uj) {
  write_file(root + "/" + zone + "/energy_uj", std::to_string(uj) + "\n");
}

/// Writes a stand-in powercap zone `root`/`zone` (zone as "intel-rapl:0" or "intel-rapl:0:1",
/// folders made as needed): its `name` ("package-0", "dram", "psys"), energy_uj = `uj` (µJ) and,
/// unless `range_uj` is empty, max_energy_range_uj = `range_uj` (µJ; Intel's 262143.3 J).
inline void fake_rapl_zone(const std::string& root, const std::string& zone,
                           const std::string& name, unsigned long long uj = 1000000,
                           std::optional<unsigned long long> range_uj = 262143328850ULL) {
  write_file(root + "/" + zone + "/name", name + "\n");
  set_rapl_uj(root, zone, uj);
  if (range_uj)
    write_file(root + "/" + zone + "/max_energy_range_uj", std::to_string(*range_uj) + "\n");
}

/// Sets process `pid`'s stat in the stand-in /proc at `root`: `jiffies` clock ticks of user
/// time, 256 resident pages (fields after ")" numbered from 3 as in proc(5)).
inline void fake_proc_pid_stat(const std::string& root, int pid, long jiffies) {
  write_file(root + "/" + std::to_string(pid) + "/stat",
             fmt::format("{} (job) S 1 {} {} 0 -1 0 0 0 0 0 {} 0 0 0 20 0 1 0 0 0 256\n", pid, pid,
                         pid, jiffies));
}

/// Sets the machine's /proc/stat in the stand-in /proc at `root`: 2 CPUs, `busy` (user) and
/// `idle` jiffies in all.
inline void fake_proc_stat(const std::string& root, long busy, long idle) {
  write_file(root + "/stat", fmt::format("cpu  {} 0 0 {} 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n"
                                         "cpu1 0 0 0 0 0 0 0 0 0 0\nintr 0\n",
                                         busy, idle));
}

/// Writes a stand-in /proc at `root` (CpuEstimateOptions::proc_root): cpuinfo of one CPU
/// ("Test CPU", not in the TDP table), MemTotal 1000000 kB and, when pid > 0, process `pid`
/// with `jiffies` of user time (fake_proc_pid_stat).
inline void fake_proc(const std::string& root, int pid = 0, long jiffies = 100) {
  write_file(root + "/cpuinfo", "processor\t: 0\nmodel name\t: Test CPU\n");
  write_file(root + "/meminfo", "MemTotal:       1000000 kB\n");
  if (pid > 0) fake_proc_pid_stat(root, pid, jiffies);
}

/// Sets an environment variable for the life of the object, then restores it.
struct EnvGuard {
  std::string key;
  std::optional<std::string> old;
  EnvGuard(std::string k, const std::string& v) : key(std::move(k)) {
    if (const char* o = getenv(key.c_str())) old = o;
    setenv(key.c_str(), v.c_str(), 1);
  }
  ~EnvGuard() {
    if (old)
      setenv(key.c_str(), old->c_str(), 1);
    else
      unsetenv(key.c_str());
  }
};

/// Another reader of the node's devices: a child process that holds the locks of `keys` in
/// `dir` (DeviceLock) until release() or the object goes. `held`: it took them all.
struct OtherReader {
  pid_t pid = -1;
  bool held = false;
  int ready[2]{-1, -1}, stop[2]{-1, -1};
  OtherReader(const std::string& dir, const std::vector<std::string>& keys) {
    EXPECT_EQ(pipe(ready), 0);
    EXPECT_EQ(pipe(stop), 0);
    pid = fork();
    if (pid == 0) {
      std::string who;
      std::vector<std::shared_ptr<DeviceLock>> locks;
      char c = 'y';
      for (const auto& k : keys) {
        locks.push_back(DeviceLock::try_acquire(dir, k, &who));
        if (!locks.back()) c = 'n';
      }
      (void)!write(ready[1], &c, 1);
      (void)!read(stop[0], &c, 1);
      _exit(0);
    }
    char c = 0;
    EXPECT_EQ(read(ready[0], &c, 1), 1);
    EXPECT_EQ(c, 'y');
    held = c == 'y';
  }
  OtherReader(const std::string& dir, const std::string& key)
      : OtherReader(dir, std::vector<std::string>{key}) {}
  OtherReader(const OtherReader&) = delete;
  OtherReader& operator=(const OtherReader&) = delete;
  /// Ends the child: its locks go with it.
  void release() {
    if (pid <= 0) return;
    (void)!write(stop[1], "x", 1);
    waitpid(pid, nullptr, 0);
    pid = -1;
    for (int fd : {ready[0], ready[1], stop[0], stop[1]}) close(fd);
  }
  ~OtherReader() { release(); }
};

/// A clock the test moves by hand.
struct ManualClock {
  double mono = 1000, wall = 1.6e9;
  MeterClock clock() {
    return {[this] { return mono; }, [this] { return wall; }};
  }
  void advance(double s) {
    mono += s;
    wall += s;
  }
};

/// A sensor whose readings a test scripts: set `next` before each sample.
class ScriptedSensor : public Sensor {
 public:
  explicit ScriptedSensor(SensorInfo info) : info_(std::move(info)) { info_.available = true; }
  const SensorInfo& info() const override { return info_; }
  Reading read(double) override { return *next; }
  std::shared_ptr<Reading> next = std::make_shared<Reading>();

 private:
  SensorInfo info_;
};

inline SensorInfo counter_info(const std::string& name, std::optional<double> wrap_j = {}) {
  SensorInfo i;
  i.name = name;
  i.domain = "cpu";
  i.kind = SensorKind::kEnergyCounter;
  i.unit = "J";
  i.wrap_j = wrap_j;
  i.method = "scripted counter";
  return i;
}

inline SensorInfo gauge_info(const std::string& name, double refresh_s = 0) {
  SensorInfo i;
  i.name = name;
  i.domain = "gpu";
  i.kind = SensorKind::kPowerGauge;
  i.unit = "W";
  i.refresh_period_s = refresh_s;
  i.method = "scripted gauge";
  return i;
}

inline Reading energy(double j) { return Reading{true, "", j, std::nullopt, {}, false}; }
inline Reading power(double w) { return Reading{true, "", std::nullopt, w, {}, false}; }
inline Reading failed(const std::string& why) { return Reading{false, why, {}, {}, {}, false}; }

/// Options for a meter without a sampling thread, locks in `lock_dir`.
inline MeterOptions manual_options(const std::string& lock_dir) {
  MeterOptions o;
  o.interval_s = 0;
  o.lock_dir = lock_dir;
  return o;
}

}  // namespace gt::energy::test
