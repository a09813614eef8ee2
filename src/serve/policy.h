// serve/policy.h: the daemon's policy file (TOML, default /etc/greentrain/serve.toml): its own
// settings ([daemon]) and who may do what beyond reading ([[allow]] rules). Reading the node's
// energy is open to every local user who may connect to the socket; setting a power limit and
// reading other users' per-process figures are refused unless a rule grants them. Who a peer
// is comes from the socket (SO_PEERCRED), never from a request. Root may set any device within
// its own range (it could do so without the daemon); a root peer may instead ask on behalf of
// another user (set_power_limit's "on_behalf_of" {uid, gid}: the SPANK plugin, in slurmstepd,
// for the job's user), and that user's rules then apply. A peer other than root cannot name
// another user.
//
//   [daemon]
//   socket = "/run/greentrain/serve.sock"   # $GT_DAEMON_SOCKET and --socket override it
//   socket_mode = "0666"                     # who may connect (octal); "0660" with socket_group
//   socket_group = "gpu"                     # the socket's group (empty: root's)
//   state_file = "/var/lib/greentrain/serve-state.json"   # leases, restored after a crash
//   interval_ms = 100                        # sampling period
//   max_clients = 1024                       # connections at once
//   prometheus_port = 9464                   # text exposition on 127.0.0.1 (0: off, default)
//   prometheus_per_process = false           # per-process series on it (any local user sees them)
//   carbon_region = "DEU"                    # a country's annual average (ISO 3166-1 alpha-3,
//                                            # energy/carbon_regions.h), as measure --carbon-region
//   carbon_intensity = 300                   # or a constant, gCO2e/kWh
//   carbon_csv = "/etc/greentrain/ci.csv"    # or a series (docs/carbon-data.md's formats)
//   carbon_utc_offset_h = 0                  # (only with carbon_csv) its naive times' UTC offset
//   carbon_unit = "kg/kWh"                   # (only with carbon_csv) its values' unit (default:
//                                            # the format's), as measure --carbon-unit
//   # carbon_region beside carbon_intensity or carbon_csv names the country the figure is for.
//
//   [[allow]]                                # one rule per block; a peer matches by user or group
//   users = ["alice", "1001"]                # names or uids
//   groups = ["ml"]                          # names or gids (any of the peer's groups)
//   power_limit = ["nvml:*", "rapl:intel-rapl:0"]   # device ids; "*" matches any rest
//   min_w = 150                              # the range a limit must lie in (W); the device's
//   max_w = 300                              # own range applies as well (only with power_limit)
//   read_all_processes = true                # per-process figures of every user
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "energy/carbon.h"

namespace gt::serve {

/// Who is at the other end of a connection (from SO_PEERCRED and the user database), or whom
/// a root peer acts for (a request's "on_behalf_of": the Slurm plugin for a job's user).
struct Peer {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  std::string user;           ///< name, or the uid as text when it has none
  std::vector<gid_t> groups;  ///< primary and supplementary groups
  std::string via;  ///< "" : the peer itself; else who asked for this user ("root, pid 12")
  /// The peer of connected socket `fd`; throws gt::Error when the kernel cannot say.
  static Peer of_socket(int fd);
  /// The user `uid` with primary group `gid`, its name and supplementary groups from the user
  /// database (getpwuid_r, getgrouplist; none known: the uid as its name, `gid` its one group).
  static Peer of_ids(uid_t uid, gid_t gid, pid_t pid);
};

/// One [[allow]] rule.
struct AllowRule {
  std::vector<std::string> users, groups;  ///< names or numeric ids
  std::vector<std::string> power_limit;    ///< device id patterns ("nvml:*")
  std::optional<double> min_w, max_w;      ///< W
  bool read_all_processes = false;
  int line = 0;  ///< where it starts in the file (for messages)
};

/// What a peer may do with one device's power limit.
struct LimitGrant {
  bool allowed = false;
  double min_w = 0, max_w = 0;  ///< W, the policy's range within the device's
  std::string why;              ///< refusal sentence when not allowed
};

struct Policy {
  std::string path;  ///< the file read ("" : built-in defaults)
  std::string socket;
  unsigned socket_mode = 0666;
  std::string socket_group;
  std::string state_file = "/var/lib/greentrain/serve-state.json";
  double interval_s = 0.1;
  int max_clients = 1024;
  int prometheus_port = 0;
  bool prometheus_per_process = false;
  std::optional<double> carbon_intensity;  ///< gCO2e/kWh
  std::string carbon_csv;
  std::string carbon_region;  ///< ISO 3166-1 alpha-3 ("DEU"), checked against the table at load
  double carbon_utc_offset_h = 0;  ///< hours east of UTC of carbon_csv's naive times
  std::string carbon_unit;  ///< carbon_csv's unit (CarbonReadOptions::unit); empty: the format's
  std::vector<AllowRule> rules;

  /// Reads a policy file. Throws gt::Error naming the file, line and key for a syntax error,
  /// an unknown key or a value of the wrong kind or range.
  static Policy load(const std::string& path);
  /// Parses policy text; `where` names it in errors.
  static Policy parse(const std::string& text, const std::string& where);
  /// What the daemon logs at start about rules that match no one: a user or group name of an
  /// [[allow]] rule that this machine's user database (getpwnam/getgrnam) does not know
  /// ("<file>:<line>: [[allow]] group 'ml' does not exist on this machine: ..."). Not an error:
  /// the name may be created later, or come from a directory service that is down.
  std::vector<std::string> warnings() const;

  /// Whether `peer` may set device `device_id` (range [dev_min_w, dev_max_w], W), and within
  /// which range: the widest of the matching rules' ranges, clipped to the device's.
  LimitGrant power_limit_grant(const Peer& peer, const std::string& device_id, double dev_min_w,
                               double dev_max_w) const;
  /// The carbon intensity the daemon serves, chosen as `measure` chooses from its options:
  /// carbon_csv (a series, naive times at carbon_utc_offset_h, values in carbon_unit; its
  /// warnings() name daemon.carbon_unit), else carbon_intensity (a
  /// constant), else carbon_region (the country's annual average, energy/carbon_regions.h);
  /// carbon_region beside a series or a constant names the country the figure is for. None of
  /// them: the world-average default, whose describe() names these keys and this file. Throws
  /// gt::Error for a series that cannot be read.
  energy::CarbonIntensity carbon() const;
  /// Whether `peer` may read every user's per-process figures (root always may).
  bool may_read_all_processes(const Peer& peer) const;
};

/// true when `pattern` matches `id`: equal, or a prefix ending in '*' ("nvml:*", "*").
bool device_matches(const std::string& pattern, const std::string& id);

}  // namespace gt::serve
