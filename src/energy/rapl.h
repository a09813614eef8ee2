// energy/rapl.h: CPU package and DRAM energy from Linux powercap RAPL
// (/sys/class/powercap/intel-rapl:*; also used by AMD since Linux 5.8). Counters are in uJ
// (energy_uj) and wrap at max_energy_range_uj. Zones overlap, and counting follows the zone
// hierarchy (intel-rapl:N:M lies inside intel-rapl:N), not the names: psys (the platform)
// contains every other zone; a sub-zone lies inside its parent (core, uncore, gpu, a die, an
// unnamed one), except dram, which the package does not include. To count no joule twice we
// count the top-level zones other than psys plus the dram sub-zones when a package is
// readable, otherwise psys alone; the others are listed with counted=false and the reason.
// Sensor names are unique ("rapl:<name>", sub-zones "rapl:<name>-N:M", a repeated name gets
// "@intel-rapl:N").
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
