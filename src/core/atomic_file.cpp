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

AtomicFile::AtomicFile(std::string path, mode_t mode)
    : path_(std::move(path)), tmp_(fmt::format("{}.tmp.{}", path_, ::getpid())) {
  ::unlink(tmp_.c_str());  // left by a process of the same pid; never follow a planted link
  fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd_ < 0)
    throw Error(fmt::format("{}: cannot write ({}); expected a writable folder", shown_bytes(path_),
                            std::strerror(errno)));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const char* what, int err) {
  ::unlink(tmp_.c_str());
  committed_ = true;  // nothing left to remove
  throw Error(fmt::format("{}: {} ({}); the file there is left as it was", shown_bytes(path_), what,
                          std::strerror(err)));
}

void AtomicFile::write(std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write failed", n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
}

void AtomicFile::write_at(std::string_view bytes, off_t offset) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pwrite(fd_, bytes.data() + done, bytes.size() - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write failed", n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0 && errno != EINVAL) fail("write failed", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("write failed", errno);  // (NFS reports some errors here)
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    committed_ = true;
    throw Error(fmt::format("{}: cannot rename {} into place ({})", shown_bytes(path_),
                            shown_bytes(tmp_), std::strerror(err)));
  }
  committed_ = true;
}

void write_file_atomic(const std::string& path, std::string_view bytes, mode_t mode) {
  AtomicFile f(path, mode);
  f.write(bytes);
  f.commit();
}

}  // namespace gt
