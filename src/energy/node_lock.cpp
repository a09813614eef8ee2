// energy/node_lock.cpp: see node_lock.h.
#include "energy/node_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace gt::energy {

std::string lock_dir(const std::string& override_dir) {
  if (!override_dir.empty()) return override_dir;
  if (const char* e = std::getenv("GT_ENERGY_LOCK_DIR"); e && *e) return e;
  return "/tmp/greentrain-energy-locks";
}

std::unique_ptr<DeviceLock> DeviceLock::try_acquire(const std::string& dir, const std::string& key,
                                                    std::string* holder) {
  if (::mkdir(dir.c_str(), 01777) == 0) ::chmod(dir.c_str(), 01777);  // umask-proof
  std::string safe = key;
  for (char& c : safe)
    if (c == '/' || c == ' ') c = '_';
  const std::string path = dir + "/" + safe + ".lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    *holder = fmt::format("{}: cannot open lock file: {}", path, std::strerror(errno));
    return nullptr;
  }
  ::fchmod(fd, 0666);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[64] = {0};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string who = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
    while (!who.empty() && (who.back() == '\n')) who.pop_back();
    *holder = fmt::format("another process ({}) is the reader of this device ({})", who, path);
    ::close(fd);
    return nullptr;
  }
  std::string me = fmt::format("pid {}\n", ::getpid());
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, me.data(), me.size(), 0);
  return std::unique_ptr<DeviceLock>(new DeviceLock(fd));
}

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace gt::energy
