// tune/rapl_device.h: a CPU package's power limit through Linux powercap RAPL:
// <zone>/constraint_0_power_limit_uw (long-term limit, µW; writing needs root), with
// constraint_0_max_power_uw (when present) as the maximum and constraint_0_min_power_uw (when
// present, else a quarter of the maximum) as the minimum.
#pragma once
#include <string>
#include <vector>

#include "tune/power_limit.h"

namespace gt::tune {

class RaplDevice : public PowerLimitDevice {
 public:
  /// zone_dir: e.g. /sys/class/powercap/intel-rapl:0. Throws gt::Error when its limit file is
  /// missing or unreadable.
  explicit RaplDevice(std::string zone_dir);
  std::string name() const override;
  double limit_w() const override;
  double min_limit_w() const override { return min_w_; }
  double max_limit_w() const override { return max_w_; }
  void set_limit_w(double limit_w) override;
  std::string permission_problem() const override;
  /// open/write/close only (async-signal-safe).
  bool restore_limit_w_from_signal(double limit_w) noexcept override;

 private:
  std::string dir_, zone_name_, limit_path_;
  double min_w_ = 0, max_w_ = 0;
};

/// CPU package zones under energy::powercap_root(root) (root, else $GT_POWERCAP_ROOT, else
/// /sys/class/powercap): top-level zones intel-rapl:N whose name starts with "package" and
/// that have a constraint_0_power_limit_uw file. psys (the platform zone), sub-zones and zones of
/// other names are never power-limit devices.
std::vector<DevicePtr> open_rapl_devices(const std::string& root = "");

}  // namespace gt::tune
