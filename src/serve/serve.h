// serve/serve.h: `greentrain serve`, the node daemon. It is the one reader of the node's sensors
// (NVML, ROCm SMI, RAPL zones, the estimates; node_reader.h) and serves every local process and
// user over a Unix socket (protocol: energy/daemon_protocol.h): cumulative energy per sensor,
// so that any number of clients measure windows exactly and nobody double counts; power limits
// set on a user's behalf under a policy (policy.h), as leases restored when the client's
// connection ends and after a daemon crash (leases.h); GPU energy per process (attribution.h);
// a Prometheus endpoint on loopback (prometheus.h). Module layering (DESIGN.md): serve depends
// on energy and tune; the client side lives in energy (daemon_client.h) and tune.
#pragma once
#include <optional>
#include <string>

namespace gt::serve {

/// The policy file read when --policy is not given and the file exists.
constexpr const char* kDefaultPolicyPath = "/etc/greentrain/serve.toml";

/// How `greentrain serve` runs. Unset fields take the policy's [daemon] values.
struct ServeOptions {
  std::string policy_path;  ///< "" : kDefaultPolicyPath when it exists, else built-in defaults
  std::string socket;       ///< "" : $GT_DAEMON_SOCKET, the policy's, or the default path
  std::string state_file;   ///< "" : the policy's
  std::optional<double> interval_s;
  std::optional<int> prometheus_port;  ///< 0 : off
  bool foreground = false;    ///< false: detach once serving (the parent prints the pid and exits)
  std::string log_file;       ///< detached: where the log goes ("" : /dev/null)
  std::string powercap_root;  ///< "" : $GT_POWERCAP_ROOT or /sys/class/powercap
};

/// Runs the daemon until SIGTERM or SIGINT (then restores every leased limit and removes the
/// socket). Returns the exit code; throws gt::Error for a bad policy, a socket another daemon
/// serves, or a state file it cannot read (nothing then runs).
int run_serve(const ServeOptions& opt);

}  // namespace gt::serve
