// core/xxhash64.h: XXH64, Yann Collet's 64-bit non-cryptographic hash, from the xxHash
// library (Debian's libxxhash-dev, used header-only: xxhash.h with XXH_INLINE_ALL). It is fast
// (several GB/s) and finds any damage that is not deliberate: checkpoints record it for each
// tensor file (train/checkpoint.h). A thin wrapper: one-shot, streaming, whole file, hex.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace gt {

/// XXH64 of `len` bytes at `data` with `seed`.
uint64_t xxh64(const void* data, size_t len, uint64_t seed = 0);

/// XXH64 fed in pieces: update() any number of times, then digest() (the same value as xxh64()
/// of all the pieces joined).
class Xxh64 {
 public:
  /// A hash of no bytes yet, with `seed`.
  explicit Xxh64(uint64_t seed = 0);
  ~Xxh64();
  /// Adds `len` bytes at `data`.
  void update(const void* data, size_t len);
  /// The hash of every byte added so far (update() may go on after it).
  uint64_t digest() const;

 private:
  struct State;  // xxHash's XXH64_state_t
  std::unique_ptr<State> st_;
};

/// XXH64 (seed 0) of the whole file at `path`, read in pieces, and its size in `bytes` when not
/// null. Throws gt::Error naming the file when it cannot be read.
uint64_t xxh64_file(const std::string& path, uint64_t* bytes = nullptr);

/// `h` as 16 lower-case hexadecimal digits, as records write it.
std::string xxh64_hex(uint64_t h);

}  // namespace gt
