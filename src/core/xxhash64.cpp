// core/xxhash64.cpp: see xxhash64.h. Constants and steps follow xxHash's doc/xxhash_spec.md
// ("XXH64 algorithm description").
#include "core/xxhash64.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/bytes_json.h"
#include "core/error.h"

namespace gt {
namespace {

constexpr uint64_t P1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t P2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t P3 = 0x165667B19E3779F9ull;
constexpr uint64_t P4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t P5 = 0x27D4EB2F165667C5ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// little-endian loads (the spec reads input as little-endian; x86 and arm64 are)
inline uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t load32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t round(uint64_t acc, uint64_t lane) {
  acc += lane * P2;
  acc = rotl(acc, 31);
  return acc * P1;
}

inline uint64_t merge(uint64_t acc, uint64_t v) {
  acc ^= round(0, v);
  return acc * P1 + P4;
}

// the accumulators over whole 32-byte stripes from p (n bytes, a multiple of 32)
void stripes(uint64_t v[4], const unsigned char* p, size_t n) {
  for (const unsigned char* end = p + n; p < end; p += 32) {
    v[0] = round(v[0], load64(p));
    v[1] = round(v[1], load64(p + 8));
    v[2] = round(v[2], load64(p + 16));
    v[3] = round(v[3], load64(p + 24));
  }
}

// the last steps: the < 32 bytes left, then the avalanche
uint64_t finish(uint64_t h, const unsigned char* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) h = rotl(h ^ round(0, load64(p)), 27) * P1 + P4;
  if (n >= 4) {
    h = rotl(h ^ (uint64_t{load32(p)} * P1), 23) * P2 + P3;
    p += 4;
    n -= 4;
  }
  for (; n > 0; ++p, --n) h = rotl(h ^ (uint64_t{*p} * P5), 11) * P1;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

uint64_t converge(const uint64_t v[4]) {
  uint64_t h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
  for (int i = 0; i < 4; ++i) h = merge(h, v[i]);
  return h;
}

}  // namespace

Xxh64::Xxh64(uint64_t seed) : seed_(seed), v_{seed + P1 + P2, seed + P2, seed, seed - P1} {}

void Xxh64::update(const void* data, size_t len) {
  auto p = static_cast<const unsigned char*>(data);
  total_ += len;
  if (buffered_ > 0) {
    const size_t take = std::min(len, sizeof buf_ - buffered_);
    std::memcpy(buf_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    len -= take;
    if (buffered_ < sizeof buf_) return;
    stripes(v_, buf_, sizeof buf_);
    buffered_ = 0;
  }
  const size_t whole = len / 32 * 32;
  stripes(v_, p, whole);
  std::memcpy(buf_, p + whole, len - whole);
  buffered_ = len - whole;
}

uint64_t Xxh64::digest() const {
  const uint64_t h = total_ >= 32 ? converge(v_) : seed_ + P5;
  return finish(h + total_, buf_, buffered_);
}

uint64_t xxh64(const void* data, size_t len, uint64_t seed) {
  Xxh64 h(seed);
  h.update(data, len);
  return h.digest();
}

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
