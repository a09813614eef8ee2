// energy/rapl.h: CPU package and DRAM energy from Linux powercap RAPL
// (/sys/class/powercap/intel-rapl:*; also used by AMD since Linux 5.8). Counters are in uJ
// (energy_uj) and wrap at max_energy_range_uj. Zones overlap: psys (platform) contains the
// packages, a package contains its core and uncore zones. To count no joule twice we count
// package-N plus dram when a package is readable, otherwise psys alone; the others are listed
// with counted=false and the reason.
#pragma once
#include <string>

#include "energy/sensor.h"

namespace gt::energy {

/// The powercap root to use: `override_root` if not empty, else $GT_POWERCAP_ROOT, else
/// /sys/class/powercap.
std::string powercap_root(const std::string& override_root = "");

/// One RAPL zone read from <zone>/energy_uj (uJ, converted to J).
class RaplSensor : public Sensor {
 public:
  RaplSensor(SensorInfo info, std::string energy_path);
  const SensorInfo& info() const override { return info_; }
  Reading read(double now_s) override;

 private:
  SensorInfo info_;
  std::string energy_path_;
};

/// All RAPL zones under the root, readable or not (unreadable ones are UnavailableSensor with
/// the reason, e.g. permission denied since Linux 5.10). Empty list when no powercap exists
/// (then one UnavailableSensor "rapl" says so).
SensorList detect_rapl(const std::string& root = "");

}  // namespace gt::energy
