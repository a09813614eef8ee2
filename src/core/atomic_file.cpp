// core/atomic_file.cpp: see atomic_file.h.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/bytes_json.h"
#include "core/error.h"

namespace gt {

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const std::string shown = shown_bytes(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    throw Error(fmt::format("{}: cannot write ({}); expected a writable folder", shown,
                            std::strerror(errno)));
  auto fail = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: {} ({}); the file there is left as it was", shown, what,
                            std::strerror(err)));
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write failed", n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL) fail("write failed", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: write failed ({})", shown, std::strerror(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: cannot rename {} into place ({})", shown, shown_bytes(tmp),
                            std::strerror(err)));
  }
}

}  // namespace gt
