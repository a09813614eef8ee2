// tune/daemon_device.h: a power limit set through the node daemon (`greentrain serve`,
// energy/daemon_client.h), so that a user without root may set the limits the daemon's policy
// allows. Each limit is a lease of this process's connection: when the process ends, however it
// ends (SIGKILL included), the daemon restores the limit in force before.
// open_power_limit_devices (power_limit.h) uses these when a daemon answers with devices.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "energy/daemon_client.h"
#include "tune/power_limit.h"

namespace gt::tune {

class DaemonDevice : public PowerLimitDevice {
 public:
  /// client: the connection that holds the leases (shared by the devices of one open);
  /// device: the daemon's description ({device, name, min_w, max_w}); grant: what the policy
  /// allows this user ({device, min_w, max_w}), or null when it allows nothing.
  DaemonDevice(std::shared_ptr<energy::daemon::DaemonClient> client, const nlohmann::json& device,
               const nlohmann::json& grant);
  /// e.g. "nvml:0 (Fake GPU 0, GPU-...) through greentrain serve".
  std::string name() const override { return name_; }
  double limit_w() const override;
  /// The policy's range for this user within the device's (W); the device's when not allowed.
  double min_limit_w() const override { return min_w_; }
  double max_limit_w() const override { return max_w_; }
  /// Throws gt::Error with the daemon's refusal (policy, range, a lease held by another).
  /// Setting the limit that was in force before the lease ends the lease.
  void set_limit_w(double limit_w) override;
  /// Empty when the policy lets this user set the device; otherwise what the daemon said.
  std::string permission_problem() const override { return problem_; }
  /// Ends the connection (async-signal-safe): the daemon restores the limit in force before.
  bool restore_limit_w_from_signal(double limit_w) noexcept override;
  const std::string& id() const { return id_; }

 private:
  std::shared_ptr<energy::daemon::DaemonClient> client_;
  std::string id_, name_, problem_;
  double min_w_ = 0, max_w_ = 0;
  std::optional<double> previous_w_;  // the limit before this connection's lease, while held
};

/// The daemon's devices of `kind` ("nvml", "rapl" or "auto": GPUs if it has any, else CPU
/// packages) visible to this process (CUDA_VISIBLE_DEVICES honoured). Empty, with *note saying
/// why, when no daemon answers or it has no such device.
std::vector<DevicePtr> open_daemon_devices(const std::string& kind, std::string* note);

}  // namespace gt::tune
