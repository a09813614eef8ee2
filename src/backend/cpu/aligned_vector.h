// backend/cpu/aligned_vector.h: std::vector whose data starts on a 64-byte boundary (a cache
// line, one AVX-512 vector), as the model's arenas do. glibc's malloc gives large blocks 16
// bytes past a page start, so with a plain vector every 64-byte vector load or store of the
// backend's buffers (16-bit operand copies, attention's per-thread blocks) straddled two
// cache lines. (oneDNN's products measured the same on aligned and misaligned operands: it
// packs them first.)
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace gt::cpu {

/// Allocator for AlignedVector: operator new with 64-byte alignment.
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64)));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <class U>
  bool operator==(const Aligned64<U>&) const {
    return true;
  }
};

/// A std::vector whose data() is 64-byte aligned.
template <class T>
using AlignedVector = std::vector<T, Aligned64<T>>;

}  // namespace gt::cpu
