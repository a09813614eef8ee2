// core/xxhash64.h: XXH64, Yann Collet's 64-bit non-cryptographic hash (xxHash, BSD-2-Clause;
// the algorithm as specified in its doc/xxhash_spec.md, written here from that text). It is
// fast (several GB/s) and finds any damage that is not deliberate: checkpoints record it for
// each tensor file (train/checkpoint.h). Results equal the reference's XXH64(data, len, seed).
#pragma once
#include <cstddef>
#include <cstdint>
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
  /// Adds `len` bytes at `data`.
  void update(const void* data, size_t len);
  /// The hash of every byte added so far (update() may go on after it).
  uint64_t digest() const;

 private:
  uint64_t seed_, v_[4];
  uint64_t total_ = 0;
  unsigned char buf_[32];
  size_t buffered_ = 0;
};

/// XXH64 (seed 0) of the whole file at `path`, read in pieces, and its size in `bytes` when not
/// null. Throws gt::Error naming the file when it cannot be read.
uint64_t xxh64_file(const std::string& path, uint64_t* bytes = nullptr);

/// `h` as 16 lower-case hexadecimal digits, as records write it.
std::string xxh64_hex(uint64_t h);

}  // namespace gt
