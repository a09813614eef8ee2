// core/xxhash64.cpp: see xxhash64.h.
#include "core/xxhash64.h"

// xxHash's functions compiled into this file (no library to link)
#define XXH_INLINE_ALL
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/bytes_json.h"
#include "core/error.h"

namespace gt {

struct Xxh64::State {
  XXH64_state_t s;
};

Xxh64::Xxh64(uint64_t seed) : st_(std::make_unique<State>()) { XXH64_reset(&st_->s, seed); }

Xxh64::~Xxh64() = default;

void Xxh64::update(const void* data, size_t len) { XXH64_update(&st_->s, data, len); }

uint64_t Xxh64::digest() const { return XXH64_digest(&st_->s); }

uint64_t xxh64(const void* data, size_t len, uint64_t seed) { return XXH64(data, len, seed); }

uint64_t xxh64_file(const std::string& path, uint64_t* bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(fmt::format("{}: cannot read ({})", shown_bytes(path), std::strerror(errno)));
  Xxh64 h;
  std::vector<unsigned char> buf(1 << 20);
  uint64_t n = 0;
  for (;;) {
    const ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      ::close(fd);
      throw Error(fmt::format("{}: cannot read ({})", shown_bytes(path), std::strerror(err)));
    }
    if (got == 0) break;
    h.update(buf.data(), static_cast<size_t>(got));
    n += static_cast<uint64_t>(got);
  }
  ::close(fd);
  if (bytes) *bytes = n;
  return h.digest();
}

std::string xxh64_hex(uint64_t h) { return fmt::format("{:016x}", h); }

}  // namespace gt
