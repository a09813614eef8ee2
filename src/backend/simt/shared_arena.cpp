// backend/simt/shared_arena.cpp: a block's shared memory (shared_arena.h).
#include "backend/simt/shared_arena.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "backend/simt/internal.h"
#include "core/error.h"

namespace gt::simt::detail {

SharedArena::SharedArena() {
  capacity_ = kMaxSharedBytesOptIn + kStaticSharedBytes + 64 * 1024;  // room for redzones
  base_ = static_cast<unsigned char*>(std::aligned_alloc(256, capacity_));
  if (!base_) throw Error("SIMT runtime: cannot allocate a block's shared memory");
}
SharedArena::~SharedArena() {
  asan_unpoison(base_, capacity_);
  std::free(base_);
}

void SharedArena::redzone(size_t off) {
  std::memset(base_ + off, kRedzone, kRedzone);
  asan_poison(base_ + off, kRedzone);
  redzones_.emplace_back(off, kRedzone);
}

void SharedArena::begin(size_t dynamic_bytes) {
  // a block that ended by an exception (a collective's error thrown out of the scheduler)
  // did not reach end(): its redzones are still poisoned for AddressSanitizer
  for (auto [off, n] : redzones_) asan_unpoison(base_ + off, n);
  decls_.clear();
  redzones_.clear();
  static_total_ = 0;
  dyn_bytes_ = dynamic_bytes;
  redzone(0);
  std::memset(base_ + kRedzone, kPoison, dyn_bytes_);
  size_t end = kRedzone + dyn_bytes_;
  redzone(end);  // the redzone right after the last byte: an overrun by one is caught
  used_ = (end + kRedzone + 15) / 16 * 16;
}

void* SharedArena::declare(size_t k, size_t bytes, size_t align, const char* name) {
  if (k < decls_.size()) {
    const Decl& d = decls_[k];
    if (d.bytes != bytes)
      throw Error(
          fmt::format("shared memory declaration {} ('{}') is {} bytes in this thread, "
                      "{} bytes ('{}') in another: threads of a block must declare the "
                      "same shared arrays in the same order",
                      k, name, bytes, d.bytes, d.name));
    return base_ + d.off;
  }
  if (k != decls_.size())
    throw Error(fmt::format("shared memory declaration {} ('{}') reached before declaration {}", k,
                            name, decls_.size()));
  if (static_total_ + bytes > kStaticSharedBytes)
    throw Error(
        fmt::format("static shared memory: '{}' ({} bytes) takes the block's static "
                    "shared memory to {} bytes, above the {} a kernel may declare "
                    "(use dynamic shared memory for more)",
                    name, bytes, static_total_ + bytes, kStaticSharedBytes));
  if (static_total_ + bytes + dyn_bytes_ > kMaxSharedBytesOptIn)
    throw Error(
        fmt::format("shared memory: {} bytes static with '{}' and {} dynamic, above the "
                    "{} bytes a block may have",
                    static_total_ + bytes, name, dyn_bytes_, kMaxSharedBytesOptIn));
  align = std::max<size_t>(align, 16);
  size_t off = (used_ + align - 1) / align * align;
  if (off + bytes + kRedzone > capacity_)
    throw Error("SIMT runtime: too many shared memory declarations in one block");
  std::memset(base_ + off, kPoison, bytes);
  decls_.push_back({off, bytes, name});
  static_total_ += bytes;
  redzone(off + bytes);
  used_ = off + bytes + kRedzone;
  return base_ + off;
}

std::string SharedArena::end() {
  std::string bad;
  if (!asan()) {
    for (auto [off, n] : redzones_) {
      for (size_t i = 0; i < n; ++i)
        if (base_[off + i] != kRedzone) {
          std::string what = "the dynamic shared memory";
          if (off == 0) what = "before the dynamic shared memory";
          for (const Decl& d : decls_)
            if (d.off + d.bytes == off)
              what = fmt::format("shared array '{}' ({} bytes)", d.name, d.bytes);
          if (off == kRedzone + dyn_bytes_)
            what = fmt::format("the dynamic shared memory ({} bytes)", dyn_bytes_);
          bad = fmt::format("a write past the end of {} (byte {} after it)", what, i);
          break;
        }
      if (!bad.empty()) break;
    }
  }
  for (auto [off, n] : redzones_) asan_unpoison(base_ + off, n);
  return bad;
}

}  // namespace gt::simt::detail
