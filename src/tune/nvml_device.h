// tune/nvml_device.h: an NVIDIA GPU's power limit through NVML (energy/nvml.h, loaded with
// dlopen): nvmlDeviceGet/SetPowerManagementLimit and ...LimitConstraints, in mW. Setting needs
// root (NVML_ERROR_NO_PERMISSION otherwise).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "energy/nvml.h"
#include "tune/power_limit.h"

namespace gt::tune {

class NvmlDevice : public PowerLimitDevice {
 public:
  /// lib: the loaded NVML (shared by all devices); index: NVML index of the GPU.
  NvmlDevice(std::shared_ptr<energy::nvml::Library> lib, unsigned index);
  std::string name() const override { return name_; }
  double limit_w() const override;
  double min_limit_w() const override { return min_w_; }
  double max_limit_w() const override { return max_w_; }
  void set_limit_w(double limit_w) override;
  /// Sets the current limit to itself: NVML answers NO_PERMISSION without root, and nothing
  /// changes either way. A current limit outside [min, max] is reported as such (it could not
  /// be restored), not as a permission problem.
  std::string permission_problem() const override;

 private:
  std::shared_ptr<energy::nvml::Library> lib_;
  energy::nvml::Device dev_ = nullptr;
  unsigned index_ = 0;
  std::string name_;
  double min_w_ = 0, max_w_ = 0;
};

/// The GPUs visible to this process (CUDA_VISIBLE_DEVICES honoured). Empty, with *note saying
/// why, when NVML cannot be loaded or has no GPU.
std::vector<DevicePtr> open_nvml_devices(std::string* note);

}  // namespace gt::tune
