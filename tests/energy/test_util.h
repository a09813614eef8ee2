// tests/energy/test_util.h: helpers shared by the energy tests: a temporary folder, a manual
// clock, a scripted sensor, environment guards.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "energy/meter.h"
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
