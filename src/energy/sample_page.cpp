// energy/sample_page.cpp: see sample_page.h.
#include "energy/sample_page.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"

namespace gt::energy {

namespace {

constexpr char kMagic[8] = {'G', 'T', 'P', 'A', 'G', 'E', '1', '\n'};
constexpr std::size_t kHeaderBytes = 64;

struct Header {
  char magic[8];
  std::atomic<std::uint64_t> seq;
  std::atomic<std::uint32_t> length;
  std::uint32_t capacity;
  std::int64_t pid;
  std::atomic<double> t_mono_s;
  std::uint64_t token;  // the writer's own, random: which writer's file this is
};
static_assert(sizeof(Header) <= kHeaderBytes);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free &&
                  std::atomic<double>::is_always_lock_free,
              "the page is shared between processes: its atomics must be lock-free");

Header* header(void* map) { return static_cast<Header*>(map); }
const Header* header(const void* map) { return static_cast<const Header*>(map); }

}  // namespace

double monotonic_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

SamplePageWriter::SamplePageWriter(std::string path, unsigned mode, gid_t gid, std::size_t capacity)
    : path_(std::move(path)), bytes_(kHeaderBytes + capacity) {
  // made whole under a temporary name (core/atomic_file.h), then renamed into place: a reader
  // never maps a page without its header
  AtomicFile page(path_, 0600);
  const int fd = page.fd();
  auto fail = [&](const char* what) {
    throw Error(fmt::format("{}: {}: {}", path_, what, std::strerror(errno)));
  };
  if (::ftruncate(fd, static_cast<off_t>(bytes_)) != 0) fail("cannot size the sample page");
  if (gid != static_cast<gid_t>(-1) && ::fchown(fd, static_cast<uid_t>(-1), gid) != 0)
    fail("cannot give the sample page to the socket's group");
  if (::fchmod(fd, mode) != 0) fail("cannot set the sample page's mode");
  map_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail("cannot map the sample page");
  }
  Header* h = new (map_) Header{};
  std::memcpy(h->magic, kMagic, sizeof kMagic);
  h->capacity = static_cast<std::uint32_t>(capacity);
  h->pid = ::getpid();
  h->token = token_ = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  try {
    page.commit();
  } catch (...) {
    ::munmap(map_, bytes_);
    map_ = nullptr;
    throw;
  }
}

SamplePageWriter::~SamplePageWriter() {
  if (!map_) return;
  // only our own file: a newer daemon may have replaced it
  if (const int fd = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC); fd >= 0) {
    Header probe{};
    if (::pread(fd, &probe, sizeof probe, 0) == static_cast<ssize_t>(sizeof probe) &&
        probe.token == token_)
      ::unlink(path_.c_str());
    ::close(fd);
  }
  ::munmap(map_, bytes_);
}

void SamplePageWriter::publish(const std::string& json_text, double t_mono_s) {
  Header* h = header(map_);
  const bool fits = json_text.size() <= h->capacity;
  const std::uint64_t s = h->seq.load(std::memory_order_relaxed);
  h->seq.store(s + 1, std::memory_order_relaxed);  // odd: being written
  std::atomic_thread_fence(std::memory_order_release);
  if (fits)
    std::memcpy(static_cast<char*>(map_) + kHeaderBytes, json_text.data(), json_text.size());
  h->length.store(fits ? static_cast<std::uint32_t>(json_text.size()) : 0,
                  std::memory_order_relaxed);
  h->t_mono_s.store(t_mono_s, std::memory_order_relaxed);
  h->seq.store(s + 2, std::memory_order_release);  // even: complete
}

std::optional<SamplePageReader> SamplePageReader::open(const std::string& path, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = fmt::format("{}: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  struct stat st {};
  SamplePageReader r;
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < kHeaderBytes) {
    ::close(fd);
    *why = fmt::format("{}: not a sample page (shorter than its header)", path);
    return std::nullopt;
  }
  r.bytes_ = static_cast<std::size_t>(st.st_size);
  void* m = ::mmap(nullptr, r.bytes_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) {
    *why = fmt::format("{}: cannot map it: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  r.map_ = m;
  const Header* h = header(m);
  if (std::memcmp(h->magic, kMagic, sizeof kMagic) != 0 ||
      kHeaderBytes + std::size_t{h->capacity} > r.bytes_) {
    *why = fmt::format("{}: not a sample page (its header is not greentrain's)", path);
    return std::nullopt;  // r's destructor unmaps
  }
  r.capacity_ = h->capacity;  // checked against the mapping once; the header is not re-trusted
  return r;
}

SamplePageReader::SamplePageReader(SamplePageReader&& o) noexcept
    : map_(std::exchange(o.map_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      capacity_(std::exchange(o.capacity_, 0)) {}
SamplePageReader& SamplePageReader::operator=(SamplePageReader&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(const_cast<void*>(map_), bytes_);
    map_ = std::exchange(o.map_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    capacity_ = std::exchange(o.capacity_, 0);
  }
  return *this;
}
SamplePageReader::~SamplePageReader() {
  if (map_) ::munmap(const_cast<void*>(map_), bytes_);
}

std::optional<std::string> SamplePageReader::read(double max_age_s) const {
  const Header* h = header(map_);
  const char* text = static_cast<const char*>(map_) + kHeaderBytes;
  std::string out;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::uint64_t s1 = h->seq.load(std::memory_order_acquire);
    if (s1 & 1) continue;  // being written
    const std::uint32_t n = h->length.load(std::memory_order_relaxed);
    const double t = h->t_mono_s.load(std::memory_order_relaxed);
    if (n > capacity_) continue;
    // The copy may race with a writer; the sequence check below throws such a copy away.
    out.assign(text, n);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (h->seq.load(std::memory_order_relaxed) != s1) continue;
    if (s1 == 0 || n == 0 || !(monotonic_s() - t <= max_age_s)) return std::nullopt;
    return out;
  }
  return std::nullopt;
}

}  // namespace gt::energy
