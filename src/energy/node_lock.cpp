// energy/node_lock.cpp: see node_lock.h.
#include "energy/node_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace gt::energy {
namespace {

// The lock descriptors this process holds. A forked child inherits them, and with them the
// locks (flock belongs to the open file description): the child would keep the device locked
// after its parent, the reader, ends. The child closes its copies at once (pthread_atfork).
constexpr int kMaxLocks = 256;
std::atomic<int> g_lock_fds[kMaxLocks];
std::once_flag g_atfork_once;

void close_inherited_locks() {  // in the child, right after fork: async-signal-safe calls only
  for (auto& slot : g_lock_fds) {
    const int fd = slot.exchange(-1);
    if (fd >= 0) ::close(fd);
  }
}

void register_fd(int fd) {
  std::call_once(g_atfork_once, [] {
    for (auto& slot : g_lock_fds) slot.store(-1);
    ::pthread_atfork(nullptr, nullptr, close_inherited_locks);
  });
  for (auto& slot : g_lock_fds) {
    int expected = -1;
    if (slot.compare_exchange_strong(expected, fd)) return;
  }
}

void unregister_fd(int fd) {
  for (auto& slot : g_lock_fds) {
    int expected = fd;
    if (slot.compare_exchange_strong(expected, -1)) return;
  }
}

}  // namespace

namespace {

std::mutex g_mu;
std::map<std::string, std::weak_ptr<DeviceLock>> g_held;  // lock path -> this process's lock

std::string user_name(uid_t uid) {
  passwd pw{}, *res = nullptr;
  char buf[1024];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return pw.pw_name;
  return std::to_string(uid);
}

std::string comm_of(long pid) {
  std::ifstream f(fmt::format("/proc/{}/comm", pid));
  std::string c;
  std::getline(f, c);
  return c;
}

// What the lock file says: "pid N", then "key value" lines (cmd, user, role). *daemon_socket:
// the socket of a node daemon holder ("greentrain serve, socket PATH"), else "".
std::string describe_holder(const std::string& text, const std::string& path,
                            std::string* daemon_socket) {
  std::istringstream in(text);
  std::string line;
  long pid = 0;
  std::string cmd, user, role;
  while (std::getline(in, line)) {
    if (line.rfind("pid ", 0) == 0) pid = std::strtol(line.c_str() + 4, nullptr, 10);
    if (line.rfind("cmd ", 0) == 0) cmd = line.substr(4);
    if (line.rfind("user ", 0) == 0) user = line.substr(5);
    if (line.rfind("role ", 0) == 0) role = line.substr(5);
  }
  if (pid <= 0) return fmt::format("another process reads this device (lock {})", path);
  if (pid == ::getpid())  // another copy of the library in this process (not shared with ours)
    return fmt::format(
        "this process (pid {}) reads this device already through another copy of "
        "greentrain's library (lock {})",
        pid, path);
  if (role.rfind("greentrain serve", 0) == 0) {
    if (const auto at = role.find(", socket "); at != std::string::npos)
      *daemon_socket = role.substr(at + 9);
    return fmt::format(
        "the node daemon ({}, pid {}) reads this device, and this process did not "
        "read through it (lock {})",
        role, pid, path);
  }
  return fmt::format("process {} ({}{}{}) {} (lock {})", pid, cmd.empty() ? "?" : cmd,
                     user.empty() ? "" : ", user ", user,
                     role.empty() ? "reads this device directly" : role, path);
}

}  // namespace

std::string lock_dir(const std::string& override_dir) {
  if (!override_dir.empty()) return override_dir;
  if (const char* e = std::getenv("GT_ENERGY_LOCK_DIR"); e && *e) return e;
  return "/tmp/greentrain-energy-locks";
}

std::shared_ptr<DeviceLock> DeviceLock::try_acquire(const std::string& dir, const std::string& key,
                                                    std::string* holder, const std::string& role,
                                                    std::string* daemon_socket) {
  std::string unused;
  if (!daemon_socket) daemon_socket = &unused;
  daemon_socket->clear();
  if (::mkdir(dir.c_str(), 01777) == 0) ::chmod(dir.c_str(), 01777);  // umask-proof
  std::string safe = key;
  for (char& c : safe)
    if (c == '/' || c == ' ') c = '_';
  const std::string path = dir + "/" + safe + ".lock";
  std::lock_guard<std::mutex> g(g_mu);
  if (auto it = g_held.find(path); it != g_held.end()) {
    // this process is the reader already; a lock of the parent's (a forked child's copy of
    // this map) is not this process's: its descriptor was closed at the fork
    if (auto held = it->second.lock(); held && held->owner_pid_ == ::getpid()) return held;
    g_held.erase(it);
  }
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    *holder = fmt::format("{}: cannot open lock file: {}", path, std::strerror(errno));
    return nullptr;
  }
  ::fchmod(fd, 0666);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[512] = {0};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    *holder =
        describe_holder(n > 0 ? std::string(buf, static_cast<size_t>(n)) : "", path, daemon_socket);
    ::close(fd);
    return nullptr;
  }
  std::string me = fmt::format("pid {}\ncmd {}\nuser {}\n", ::getpid(), comm_of(::getpid()),
                               user_name(::getuid()));
  if (!role.empty()) me += "role " + role + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, me.data(), me.size(), 0);
  register_fd(fd);
  std::shared_ptr<DeviceLock> lock(new DeviceLock(fd));
  g_held[path] = lock;
  return lock;
}

DeviceLock::DeviceLock(int fd) : fd_(fd), owner_pid_(::getpid()) {}

DeviceLock::~DeviceLock() {
  if (fd_ < 0 || ::getpid() != owner_pid_) return;  // a forked child closed its copy at fork
  unregister_fd(fd_);
  ::close(fd_);
}

}  // namespace gt::energy
