// energy/node_lock.h: one reader per device per node. Several processes each measuring the
// whole node would count it several times; so the meter reads a device only while it holds an
// exclusive flock(2) on <dir>/<device_key>.lock. The lock goes with the process (also on a
// crash). The meters of one process share its lock (they are one reader). A forked child does
// not inherit it: it closes its copies of the lock descriptors at the fork (pthread_atfork), so
// a child that outlives its parent never holds the device. The node daemon (`greentrain serve`)
// holds the locks while it runs, and every process reads through it. The directory is
// $GT_ENERGY_LOCK_DIR, else /tmp/greentrain-energy-locks (mode 1777, shared by all users: a
// per-user $XDG_RUNTIME_DIR would hide other users' readers).
#pragma once
#include <memory>
#include <string>

namespace gt::energy {

/// The lock directory: `override_dir` if not empty, else $GT_ENERGY_LOCK_DIR, else
/// /tmp/greentrain-energy-locks.
std::string lock_dir(const std::string& override_dir = "");

/// An exclusive, non-blocking lock on one device, released when the last meter of this process
/// that shares it lets go (in the process that took it; a forked child holds no copy).
class DeviceLock {
 public:
  /// Takes the lock, or shares it when this process holds it already. Otherwise returns nullptr
  /// and sets *holder to who holds it, e.g. "process 1234 (greentrain, user bob) reads this
  /// device directly (lock /tmp/greentrain-energy-locks/rapl-intel-rapl:0.lock)", or why it
  /// could not be taken. `role`: what the lock file says of the holder besides its pid, command
  /// and user: the daemon writes "greentrain serve, socket PATH" (told as the node daemon); any
  /// other role says how the holder counts the device, in place of "reads this device directly"
  /// (daemon_client.h's kNodeShareRole). `daemon_socket` (may be null): set, when the holder is
  /// the node daemon, to the socket its role names ("" when it names none or another holds it).
  static std::shared_ptr<DeviceLock> try_acquire(const std::string& dir, const std::string& key,
                                                 std::string* holder, const std::string& role = "",
                                                 std::string* daemon_socket = nullptr);
  ~DeviceLock();
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;

 private:
  explicit DeviceLock(int fd);
  int fd_ = -1;
  int owner_pid_ = 0;
};

}  // namespace gt::energy
