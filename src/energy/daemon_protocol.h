// energy/daemon_protocol.h: the protocol between `greentrain serve` (the node daemon, src/serve)
// and its clients: the Meter (daemon_client.h), tune's power-limit devices, the SPANK plugin, or
// any program that speaks it. Both ends use this file, so it lives where the energy module (the
// client side) can use it; serve depends on energy, never the reverse.
//
// Transport: a Unix stream socket; default /run/greentrain/serve.sock, $GT_DAEMON_SOCKET
// overrides it. The daemon takes who the peer is (uid, gid, pid) from the socket (SO_PEERCRED),
// never from a request.
//
// Framing: each message is a 4-byte unsigned length in network byte order (big-endian), then that
// many bytes of UTF-8 JSON holding one object. A request is at most kMaxRequestBytes (64 KiB), a
// response at most kMaxResponseBytes (4 MiB). A longer length is a framing error: the daemon
// answers {"ok": false, "code": "too_large"} and closes the connection (it cannot find the next
// message). A connection must send its first complete request within kFirstRequestTimeoutS and
// finish a message it began within kMessageTimeoutS; a peer that does not read its responses is
// dropped when kMaxPendingResponseBytes wait for it longer than kMessageTimeoutS.
//
// Version: every message carries "v": kProtocolVersion (1). A request with another version gets
// {"ok": false, "code": "unknown_version", "versions": [1]} and the connection stays open. New
// fields may be added to responses within a version; clients ignore fields they do not know.
//
// Requests: {"v": 1, "op": OP, "id": ANY (optional, echoed), ...}. Responses: {"v": 1, "ok": true,
// "id": ..., ...} or {"v": 1, "ok": false, "id": ..., "code": CODE, "error": SENTENCE}. Requests on
// one connection are answered in order.
//
//   op "hello": who the daemon is and what it reads.
//     -> daemon {name, version, pid, started_unix_s, instance}, socket, sample_page (the path
//        of the shared page that holds the latest sample, energy/sample_page.h, or null),
//        interval_s,
//        sensors [SensorInfo as sensor_info_to_json], carbon {g_per_kwh, source, origin, region,
//        country (ISO alpha-3 of the policy's carbon_region, or ""), csv, utc_offset_h}, you {uid,
//        gid, pid, user}, may {power_limit [{device, min_w, max_w}], read_all_processes},
//        node_gpus {amd: N} (the node's GPUs by vendor, which a client's
//        visible-devices entries index: amd is ROCm SMI's count, every AMD GPU of the node,
//        whether the daemon reads it or not; a client resolves ROCR_VISIBLE_DEVICES against it.
//        Absent where the daemon could not count them, or is older than the key: a client then
//        takes the daemon's highest "rocm-<index>" sensor + 1)
//   op "read", {"fresh": bool}: the cumulative readings of every sensor (a Sample, below).
//        fresh: a sample taken after the request arrived (for window boundaries; the daemon
//        takes one sample for all fresh requests waiting); otherwise the latest sample, at most
//        interval_s old (the sample page holds the same text; clients read it there instead).
//   op "power_limits": -> devices [{device, name, uuid, limit_w, min_w, max_w, leased_by}]
//        (leased_by: null or {uid, pid, user}).
//   op "set_power_limit", {"device": ID, "limit_w": W, "clamp": bool, "on_behalf_of": {"uid": N,
//        "gid": N}}: sets the device's limit as a lease held by this connection. clamp (default
//        false): a limit outside the allowed range is set at its nearest end instead of refused.
//        on_behalf_of: only a root peer may name another user (the SPANK plugin for the job's
//        user); the policy's rules of that user then apply, not root's; anyone else naming
//        another uid or gid gets not_permitted. When the connection ends (exit, crash, SIGKILL) or
//        the client sends "release_power_limit", the daemon restores the limit in force before the
//        first lease.
//        -> {device, limit_w (the limit set), previous_w, applied_w (the device's limit read
//        back after setting, null when unreadable)}. Codes: no_such_device, not_permitted (the
//        policy does not let this user set it), out_of_range (outside the policy's or the device's
//        range), busy (another connection holds a lease on it), failed (the device refused).
//   op "release_power_limit", {"device": ID}: restores now. -> {device, limit_w}
//   op "attribution", {"scope": "self" | "all", "pid": N, "cgroup": PATH}: the energy of GPU
//        processes attributed by NVML's per-process utilization, or on a GPU in MIG mode by
//        each instance's compute slices (see serve/attribution.h).
//        "self": the peer's process tree; "pid": N's tree; "cgroup": the processes of that
//        cgroup (v2 path, e.g. /system.slice/slurmstepd.scope/job_12). Only the peer's own
//        processes unless the policy grants read_all_processes. -> {t_mono_s, gpus [{sensor,
//        energy_j, attributed_j, unattributed_j, note, mig_instances [{device, energy_j,
//        attributed_j, unattributed_j}]}], processes [{pid, uid, user, comm, cgroup, gpu,
//        mig_device (null off MIG), energy_j, exited}], total_j, method}
//
// Error codes: too_large, bad_json, bad_request, unknown_version, unknown_op, no_such_device,
// not_permitted, out_of_range, busy, failed, too_many_clients, timeout.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "energy/sensor.h"

namespace gt::energy::daemon {

constexpr int kProtocolVersion = 1;
constexpr std::size_t kMaxRequestBytes = 64 * 1024;                ///< bytes of one request's JSON
constexpr std::size_t kMaxResponseBytes = 4 * 1024 * 1024;         ///< bytes of one response's JSON
constexpr std::size_t kMaxPendingResponseBytes = 8 * 1024 * 1024;  ///< unread output per peer
constexpr double kFirstRequestTimeoutS = 5;  ///< s from connect to the first whole request
constexpr double kMessageTimeoutS = 5;       ///< s to finish sending or receiving one message
constexpr const char* kDefaultSocket = "/run/greentrain/serve.sock";

/// The socket path: `override_path` if not empty, else $GT_DAEMON_SOCKET, else kDefaultSocket.
std::string socket_path(const std::string& override_path = "");
/// Where the daemon at `socket` keeps its sample page (energy/sample_page.h): "<socket>.page".
/// Clients take the path from hello's "sample_page" (null: none).
inline std::string sample_page_path(const std::string& socket) { return socket + ".page"; }

/// A protocol error: `code` is one of the error codes above, what() the sentence for the user.
class ProtocolError : public Error {
 public:
  ProtocolError(std::string code, const std::string& msg, nlohmann::json id = nullptr)
      : Error(msg), code_(std::move(code)), id_(std::move(id)) {}
  const std::string& code() const { return code_; }
  /// The id of the request refused, when it could be read (for the response).
  const nlohmann::json& id() const { return id_; }

 private:
  std::string code_;
  nlohmann::json id_;
};

/// Appends one frame (4-byte big-endian length, then payload) to `out`. Throws ProtocolError
/// ("too_large") when payload exceeds max_bytes.
void append_frame(std::string& out, std::string_view payload,
                  std::size_t max_bytes = kMaxResponseBytes);

/// Splits a byte stream into frames. Feed what arrives; next() hands out whole payloads.
class FrameReader {
 public:
  explicit FrameReader(std::size_t max_bytes) : max_(max_bytes) {}
  enum class Status { kNeedMore, kFrame, kTooLarge };
  void feed(const char* data, std::size_t n) { buf_.append(data, n); }
  /// kFrame: *payload is the next message. kNeedMore: no whole message yet. kTooLarge: the next
  /// message's length exceeds max_bytes (the stream cannot be resynchronized).
  Status next(std::string* payload);
  /// Bytes received and not yet handed out (a message in progress when > 0).
  std::size_t buffered() const { return buf_.size() - pos_; }
  /// The announced length of the message in progress, when its 4 bytes have arrived.
  std::optional<std::uint32_t> pending_length() const;

 private:
  std::size_t max_;
  std::string buf_;
  std::size_t pos_ = 0;
};

/// A parsed request.
struct Request {
  std::string op;
  nlohmann::json id;    ///< echoed in the response (null when absent)
  nlohmann::json body;  ///< the whole object
};

/// Parses one request payload. Throws ProtocolError: bad_json (not JSON, or not an object),
/// unknown_version (v missing or not kProtocolVersion), bad_request (op missing or not a string).
Request parse_request(std::string_view payload);

/// {"v":1,"ok":false,"id":id,"code":code,"error":message} as text.
std::string error_response(const nlohmann::json& id, std::string_view code,
                           std::string_view message);

/// Reads a field of a request: throws ProtocolError("bad_request") naming the field and the
/// type expected when it is missing (and no default) or of the wrong type.
double number_field(const nlohmann::json& body, const char* key);
std::string string_field(const nlohmann::json& body, const char* key);

/// One sensor's cumulative reading, as the daemon keeps it.
struct SensorReading {
  std::string sensor;             ///< SensorInfo::name
  bool ok = true;                 ///< false: the last read failed (error says why)
  std::string error;              ///< why the last read failed
  double energy_j = 0;            ///< J since the daemon began reading this sensor; never falls
  std::optional<double> power_w;  ///< the last interval's power (W)
  double untrusted_s = 0;         ///< cumulative seconds whose energy is a fill, not a reading
  double unknown_s = 0;           ///< cumulative seconds with no trusted power at all: their
                                  ///< energy is not in energy_j (a lower bound then)
  std::string note;               ///< why the last untrusted interval was untrusted
  std::optional<double> failing_since_unix_s;  ///< set while reads keep failing
};

/// One sample of every sensor.
struct Sample {
  std::uint64_t seq = 0;  ///< increases by one per sample
  double t_mono_s = 0;    ///< CLOCK_MONOTONIC at the sample (s), comparable across processes
  double t_unix_s = 0;    ///< wall clock at the sample (s since 1970 UTC)
  std::string instance;   ///< the daemon run's id: changes when the daemon restarts
  std::vector<SensorReading> readings;
  std::optional<double> carbon_g_per_kwh;  ///< the intensity in force (gCO2e/kWh)
};

nlohmann::json sensor_info_to_json(const SensorInfo& s);
/// Throws ProtocolError("bad_request") naming the field at fault.
SensorInfo sensor_info_from_json(const nlohmann::json& j);
nlohmann::json sample_to_json(const Sample& s);
/// Throws ProtocolError("bad_request") naming the field at fault.
Sample sample_from_json(const nlohmann::json& j);

}  // namespace gt::energy::daemon
