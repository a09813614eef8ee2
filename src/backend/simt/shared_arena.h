// backend/simt/shared_arena.h: one block's shared memory in the SIMT runtime: the launch's
// dynamic bytes first, then each static array as the block's threads reach its declaration,
// every region poisoned at its start (0xFF) and followed by a redzone (poisoned for ASan;
// checked at the block's end otherwise).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace gt::simt::detail {

class SharedArena {
 public:
  SharedArena();
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  /// A new block with `dynamic_bytes` of dynamic shared memory (poisoned); the last block's
  /// redzones are released first, whether or not it reached end().
  void begin(size_t dynamic_bytes);
  /// The k-th static declaration of the block (bytes, alignment, the name in the kernel):
  /// made at its first request, the same memory for every later one. Errors: gt::Error when
  /// k skips a declaration, when a thread asks a different size for the same k, or when the
  /// block's static arrays pass 48 KiB or static and dynamic together 227 KiB.
  void* declare(size_t k, size_t bytes, size_t align, const char* name);
  void* dynamic(size_t* bytes) {
    *bytes = dyn_bytes_;
    return base_ + kRedzone;
  }
  /// Bytes of static shared memory the block declared.
  size_t static_bytes() const { return static_total_; }
  /// "" when every redzone is intact, else which array was overrun. Unpoisons the arena.
  std::string end();

 private:
  static constexpr size_t kRedzone = 64;
  struct Decl {
    size_t off, bytes;
    const char* name;
  };
  unsigned char* base_ = nullptr;
  size_t capacity_ = 0;
  size_t dyn_bytes_ = 0;
  size_t used_ = 0;  ///< end of the last region's redzone
  size_t static_total_ = 0;
  std::vector<Decl> decls_;
  std::vector<std::pair<size_t, size_t>> redzones_;  ///< (offset, bytes)
  void redzone(size_t off);
};

}  // namespace gt::simt::detail
