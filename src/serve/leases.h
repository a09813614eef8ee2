// serve/leases.h: power limits set on a user's behalf, as leases. A client's connection that
// sets a device's limit holds a lease on it; when the connection ends (the client exits, crashes
// or is killed with SIGKILL) or releases it, the daemon restores the limit that was in force
// before. Every lease is recorded in a state file (JSON, written to a temporary name and
// renamed) before the limit changes, so a daemon that is itself killed restores the recorded
// limits when it starts again, before it serves anyone (the systemd unit restarts it).
// One lease per device at a time: another connection's request gets "busy".
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serve/policy.h"
#include "tune/power_limit.h"

namespace gt::serve {

/// A device's id for clients and policies: its name up to " (": "nvml:0", "rapl:intel-rapl:0".
std::string device_id(const tune::PowerLimitDevice& d);

class Leases {
 public:
  /// devices: the node's power-limit devices (tune::open_power_limit_devices); state_file: where
  /// leases are recorded ("" : not recorded, tests).
  Leases(std::vector<tune::DevicePtr> devices, std::string state_file);

  /// Restores the limits recorded by a previous run that ended holding leases, then records
  /// none. Returns one line per device for the log. Throws gt::Error when the state file exists
  /// and cannot be read or parsed (naming it and what is wrong: nothing is restored blindly).
  std::vector<std::string> recover();

  /// Every device: {device, name, uuid, limit_w, min_w, max_w, leased_by}.
  nlohmann::json list() const;
  /// Sets `id`'s limit to limit_w (W) on behalf of connection `conn` of `peer` (the user the
  /// lease is recorded for: the connection's, or whom a root peer acts for), as the policy
  /// allows. `clamp`: a limit outside the allowed range is moved to its nearest end instead of
  /// refused. Throws energy::daemon::ProtocolError with code no_such_device, not_permitted,
  /// out_of_range, busy or failed. Returns {device, limit_w (W, the limit set), previous_w,
  /// applied_w (W, the device's limit read back after setting; null when it cannot be read)}.
  nlohmann::json set(std::uint64_t conn, const Peer& peer, const Policy& policy,
                     const std::string& id, double limit_w, bool clamp = false);
  /// Restores `id` now if `conn` holds its lease (ProtocolError otherwise).
  nlohmann::json release(std::uint64_t conn, const std::string& id);
  /// Restores every lease `conn` holds (its connection ended). Lines for the log.
  std::vector<std::string> release_all(std::uint64_t conn);
  /// Restores every lease (the daemon stops). Lines for the log.
  std::vector<std::string> release_everything();
  /// The limits the policy lets `peer` set: [{device, min_w, max_w}].
  nlohmann::json grants(const Peer& peer, const Policy& policy) const;
  /// For the Prometheus endpoint: (id, limit W or empty when unreadable, leased).
  std::vector<std::tuple<std::string, std::optional<double>, bool>> limits() const;

 private:
  struct Lease {
    std::uint64_t conn = 0;
    uid_t uid = 0;
    pid_t pid = 0;
    std::string user;
    double previous_w = 0, limit_w = 0, since_unix_s = 0;
  };
  tune::PowerLimitDevice* find(const std::string& id) const;
  std::string restore_locked(const std::string& id, const Lease& l);
  void save_locked() const;

  std::vector<tune::DevicePtr> devices_;
  std::string state_file_;
  std::map<std::string, Lease> leases_;  // device id -> lease
  mutable std::mutex mu_;
};

}  // namespace gt::serve
