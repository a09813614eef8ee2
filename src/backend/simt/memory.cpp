// backend/simt/memory.cpp: the SIMT runtime's device memory: allocations between guard zones,
// poisoned when made and when freed, released late (a quarantine), and the lookup that checks
// kernel arguments and copies against them.
#include <fmt/format.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "backend/simt/internal.h"
#include "core/error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GT_SIMT_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define GT_SIMT_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define GT_SIMT_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define GT_SIMT_TSAN 1
#endif
#ifdef GT_SIMT_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace gt::simt {
namespace detail {

bool asan() {
#ifdef GT_SIMT_ASAN
  return true;
#else
  return false;
#endif
}
bool tsan() {
#ifdef GT_SIMT_TSAN
  return true;
#else
  return false;
#endif
}
void asan_poison(const void* p, size_t bytes) {
#ifdef GT_SIMT_ASAN
  ASAN_POISON_MEMORY_REGION(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}
void asan_unpoison(const void* p, size_t bytes) {
#ifdef GT_SIMT_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}

namespace {

/// Allocations of at least this many bytes are mmap'ed (pages committed only when touched).
constexpr size_t kMapBytes = size_t(1) << 20;
/// Freed memory waits here until this much has been freed after it.
constexpr size_t kQuarantineBytes = size_t(256) << 20;

struct Alloc {
  size_t bytes;      ///< as asked
  char* raw;         ///< start of the front guard
  size_t raw_bytes;  ///< front guard + bytes + back guard (and rounding)
  bool mapped;
  uint64_t id;
};

class Registry {
 public:
  void* allocate(size_t bytes) {
    const size_t body = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
    const size_t raw_bytes = kGuardBytes + body + kGuardBytes;
    char* raw = nullptr;
    const bool mapped = raw_bytes >= kMapBytes;
    if (mapped) {
      void* m = mmap(nullptr, raw_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      raw = m == MAP_FAILED ? nullptr : static_cast<char*>(m);
    } else {
      raw = static_cast<char*>(std::aligned_alloc(256, raw_bytes));
    }
    if (!raw)
      throw Error(fmt::format("cuda-emu: cannot allocate {} bytes of device memory", bytes));
    char* p = raw + kGuardBytes;
    const bool fill = config().execute;
    std::memset(raw, kGuard, kGuardBytes);
    if (fill) std::memset(p, kPoison, bytes);
    std::memset(p + bytes, kGuard, raw_bytes - kGuardBytes - bytes);
    asan_poison(raw, kGuardBytes);
    asan_poison(p + bytes, raw_bytes - kGuardBytes - bytes);
    std::lock_guard lock(m_);
    live_[reinterpret_cast<uintptr_t>(p)] = Alloc{bytes, raw, raw_bytes, mapped, next_id_++};
    return p;
  }

  void release(void* p) {
    std::unique_lock lock(m_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(p));
    if (it == live_.end()) {
      const bool was = freed_.count(reinterpret_cast<uintptr_t>(p)) > 0;
      throw Error(fmt::format("cuda-emu: cudaFree({}): {}", p,
                              was ? "this memory was freed already (a double free)"
                                  : "not the start of a live device allocation"));
    }
    Alloc a = it->second;
    live_.erase(it);
    asan_unpoison(p, a.bytes);
    if (config().execute) std::memset(p, kPoison, a.bytes);
    asan_poison(a.raw, a.raw_bytes);  // any use after the free is an ASan report
    quarantine_.push_back(a);
    freed_.insert(reinterpret_cast<uintptr_t>(p));
    held_ += a.raw_bytes;
    while (held_ > kQuarantineBytes && !quarantine_.empty()) {
      Alloc old = quarantine_.front();
      quarantine_.pop_front();
      held_ -= old.raw_bytes;
      freed_.erase(reinterpret_cast<uintptr_t>(old.raw + kGuardBytes));
      asan_unpoison(old.raw, old.raw_bytes);
      if (old.mapped)
        munmap(old.raw, old.raw_bytes);
      else
        std::free(old.raw);
    }
  }

  bool range(const void* p, size_t bytes, const void** base, size_t* size) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard lock(m_);
    auto it = live_.upper_bound(a);
    if (it == live_.begin()) return false;
    --it;
    if (a < it->first || a + bytes > it->first + it->second.bytes) return false;
    if (base) *base = reinterpret_cast<const void*>(it->first);
    if (size) *size = it->second.bytes;
    return true;
  }

  void check_guards(const char* after) {
    if (asan()) return;  // the guards are poisoned: ASan reports any access at once
    std::lock_guard lock(m_);
    for (const auto& [base, a] : live_) {
      const char* p = reinterpret_cast<const char*>(base);
      auto bad = [](const char* from, size_t n) -> int64_t {
        for (size_t i = 0; i < n; ++i)
          if (static_cast<unsigned char>(from[i]) != kGuard) return int64_t(i);
        return -1;
      };
      const int64_t front = bad(a.raw, kGuardBytes);
      const int64_t back =
          bad(p + a.bytes, std::min<size_t>(kGuardBytes, a.raw_bytes - kGuardBytes - a.bytes));
      if (front >= 0 || back >= 0)
        throw Error(fmt::format(
            "cuda-emu: {} wrote outside device memory: allocation #{} ({} bytes at {}) has its "
            "guard zone changed {} bytes {} it",
            after, a.id, a.bytes, static_cast<const void*>(p),
            front >= 0 ? int64_t(kGuardBytes) - front : back + 1,
            front >= 0 ? "before" : "after the end of"));
    }
  }

 private:
  std::mutex m_;
  std::map<uintptr_t, Alloc> live_;
  std::deque<Alloc> quarantine_;
  std::set<uintptr_t> freed_;
  size_t held_ = 0;
  uint64_t next_id_ = 1;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: backends may free at exit
  return *r;
}

}  // namespace

void check_guards(const char* after) { registry().check_guards(after); }

}  // namespace detail

void* device_malloc(size_t bytes) {
  detail::check_device("cudaMalloc");
  detail::refuse_while_this_thread_captures("cudaMalloc");
  return detail::registry().allocate(bytes);
}

bool device_range(const void* p, size_t bytes, const void** base, size_t* size) {
  return detail::registry().range(p, bytes, base, size);
}

namespace detail {
void release_allocation(void* p) { registry().release(p); }
}  // namespace detail

}  // namespace gt::simt
