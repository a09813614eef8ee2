// energy/daemon_client.h: the client side of `greentrain serve` (protocol: daemon_protocol.h).
// When the daemon runs, it is the one reader of the node's sensors and every Meter reads through
// it: its sensors here are DaemonSensors whose readings are the daemon's cumulative energies, so
// a window is the difference of two readings and any number of clients, in any number of
// processes and users, measure at once without double counting. Without a daemon, Meter::create
// reads the sensors directly (one reader per device per node, node_lock.h).
#pragma once
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "energy/daemon_protocol.h"
#include "energy/meter.h"
#include "energy/sample_page.h"
#include "energy/sensor.h"

namespace gt::energy::daemon {

/// The daemon answered a request with an error: code() is its error code (daemon_protocol.h).
class DaemonError : public ProtocolError {
 public:
  using ProtocolError::ProtocolError;
};

/// One connection to the daemon. Requests are answered in order; call() is thread-safe.
class DaemonClient {
 public:
  /// Connects to `path` (socket_path() when empty) and says hello. nullptr when no daemon can be
  /// used; *why then says why ("no daemon: /run/greentrain/serve.sock does not exist", a
  /// permission refused, a daemon that does not answer within timeout_s) and *present whether
  /// a socket file was there (a daemon that could not be used is worth reporting; none is not).
  static std::unique_ptr<DaemonClient> connect(const std::string& path, std::string* why,
                                               bool* present = nullptr, double timeout_s = 5);
  ~DaemonClient();
  DaemonClient(const DaemonClient&) = delete;
  DaemonClient& operator=(const DaemonClient&) = delete;

  /// Sends `request` (v and id are filled in) and returns the response. Throws DaemonError when
  /// the daemon answers ok=false (its code and sentence), Error on a broken connection or
  /// no answer within timeout_s (the connection is then closed: broken() is true).
  nlohmann::json call(nlohmann::json request, double timeout_s = 10);
  /// The latest sample's JSON text (sample_to_json) from the daemon's sample page
  /// (energy/sample_page.h), without a request: when hello named a page this process can map
  /// and its sample is at most max(1 s, 5 sampling intervals) old. Empty optional otherwise
  /// (then ask through call(), which also finds a daemon that restarted).
  std::optional<std::string> read_sample_page();
  /// Whether `sample` (a read response or a page's sample) is from the daemon this client said
  /// hello to (its "instance"): a page at a path another daemon now serves, or a socket mounted
  /// into a container under another path, names another daemon's page.
  bool same_daemon(const nlohmann::json& sample) const;
  /// The daemon's answer to hello (daemon, sensors, carbon, you, may).
  const nlohmann::json& hello() const { return hello_; }
  const std::string& path() const { return path_; }
  /// "greentrain serve (pid N) at PATH".
  std::string describe() const;
  bool broken() const { return fd_ < 0; }
  /// Ends the connection at once (shutdown(2); async-signal-safe, takes no lock): the daemon
  /// then restores every power limit this connection leased. For signal handlers.
  void abort_connection() noexcept;

 private:
  DaemonClient(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void close_fd();
  int fd_ = -1;
  std::string path_;
  nlohmann::json hello_;
  std::uint64_t next_id_ = 1;
  std::mutex mu_;
  std::optional<SamplePageReader> page_;
  bool page_tried_ = false;
  double page_max_age_s_ = 1;
};

/// The sensors a Meter reads through a daemon, and the batch that fetches one sample per tick.
struct DaemonSensors {
  SensorList sensors;
  std::shared_ptr<SensorBatch> batch;
  std::string source;  ///< DaemonClient::describe()
  /// The daemon's carbon intensity (for meters left at the default): constant gCO2e/kWh, or a
  /// series file the daemon reads.
  std::optional<CarbonIntensity> carbon;
  std::vector<std::string> flags;  ///< meter-wide (GPUs asked for and not measured)
};

/// The lock a rank of a multi-rank job (MeterOptions::node_devices_shared) takes to count a
/// node-wide sensor it reads through the daemon: "through-daemon-<the daemon's device_key>"
/// (its name where it has none), in the meter's lock directory (node_lock.h).
std::string node_share_key(const SensorInfo& s);
/// What the share lock's file says of its holder (DeviceLock::try_acquire's role).
extern const char* const kNodeShareRole;

/// The daemon's sensors chosen as `opt` chooses direct ones (detect_sensors): the GPUs this
/// process sees (NVIDIA: CUDA_VISIBLE_DEVICES, UUIDs resolved through NVML when this process
/// can load it; AMD: ROCR_VISIBLE_DEVICES then HIP_VISIBLE_DEVICES, rocm_visible_here, among
/// the node's AMD GPUs that hello's node_gpus counts, else up to the daemon's highest), then
/// opt.gpus's positions among each vendor's (choose_gpus: an Error for a position that is not a
/// visible GPU; one that cannot be read is an Error with opt.gpus_strict, else a flag); RAPL
/// zones when opt.use_rapl, the machine-wide CPU and memory estimates when opt.use_estimate and
/// opt.pid == 0 (a process-tree estimate, opt.pid > 0, is made here, in this process). With
/// opt.node_devices_shared, the node-wide sensors counted carry the lock key node_share_key:
/// the meter of the job's rank that takes it first counts them, the others leave them out (as
/// Meter does for direct readers). Empty optional when no daemon can be used
/// (opt.daemon_socket, $GT_DAEMON_SOCKET, or the default path); *why and *present as for
/// DaemonClient::connect. GPUs are numbered (SensorInfo::index) by their position among this
/// process's visible GPUs.
std::optional<DaemonSensors> daemon_sensors(const MeterOptions& opt, std::string* why,
                                            bool* present);

}  // namespace gt::energy::daemon
