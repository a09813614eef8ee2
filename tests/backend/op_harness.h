// The harness of the backend op test (test_backend_ops.cpp), in the manner of ggml's
// test-backend-ops: device buffers with guard bytes on both sides, host<->device copies only
// through the backend, normalized errors, and an optional timing of each op call.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace gt::test {

/// Bytes of guard on each side of every device buffer, and their fill byte.
constexpr size_t kGuard = 256;
constexpr unsigned char kGuardByte = 0xA5;

/// One device buffer of n elements of `elem` bytes, between two guard zones.
struct DevBuf {
  Backend& be;
  size_t bytes;
  char* base;
  DevBuf(Backend& b, size_t n_bytes) : be(b), bytes(n_bytes) {
    base = static_cast<char*>(be.allocate(bytes + 2 * kGuard));
    std::vector<unsigned char> fill(bytes + 2 * kGuard, kGuardByte);
    be.copy_to_device(base, fill.data(), fill.size());
  }
  ~DevBuf() { be.deallocate(base); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void* data() const { return base + kGuard; }
  /// True when no byte of either guard zone changed.
  bool guards_intact() const {
    std::vector<unsigned char> all(bytes + 2 * kGuard);
    be.copy_to_host(all.data(), base, all.size());
    for (size_t i = 0; i < kGuard; ++i)
      if (all[i] != kGuardByte || all[kGuard + bytes + i] != kGuardByte) return false;
    return true;
  }
};

/// What one run of a case gives: named host copies of its outputs and scalar results.
struct Outputs {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;
  void add(const std::string& name, std::vector<float> v) {
    names.push_back(name);
    values.push_back(std::move(v));
  }
};

/// The buffers of one run of a case on one backend. Inputs are generated on the host from
/// fixed seeds, so every backend sees the same values.
class Ctx {
 public:
  Ctx(Backend& be, Precision p, bool timing) : be(be), precision(p), timing_(timing) {}
  Backend& be;
  const Precision precision;

  /// A device copy of host floats. Any of them may be a weight: the backend's 16-bit weight
  /// copies are marked stale, as after every write to parameters (Backend::weights_updated).
  float* in(const std::vector<float>& host) {
    auto* p = static_cast<float*>(alloc(host.size() * sizeof(float)));
    be.copy_to_device(p, host.data(), host.size() * sizeof(float));
    be.weights_updated();
    return p;
  }
  int32_t* in(const std::vector<int32_t>& host) {
    auto* p = static_cast<int32_t*>(alloc(host.size() * sizeof(int32_t)));
    be.copy_to_device(p, host.data(), host.size() * sizeof(int32_t));
    return p;
  }
  /// An output of n floats, filled with `fill` (NaN: an element the op leaves unwritten shows).
  float* out(size_t n, float fill = NAN) { return in(std::vector<float>(n, fill)); }
  /// Host copy of n floats at device pointer p.
  std::vector<float> get(const float* p, size_t n) {
    std::vector<float> h(n);
    be.copy_to_host(h.data(), p, n * sizeof(float));
    return h;
  }
  /// Host copy of n bf16 values at p, widened to float (exact).
  std::vector<float> get_bf16(const void* p, size_t n) {
    std::vector<uint16_t> h(n);
    be.copy_to_host(h.data(), p, n * sizeof(uint16_t));
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i) {
      uint32_t u = static_cast<uint32_t>(h[i]) << 16;
      std::memcpy(&f[i], &u, 4);
    }
    return f;
  }
  /// Runs the op call f; in timing mode runs it again until 0.2 s have passed and keeps the
  /// seconds per call of the last call timed (timed_seconds()).
  void call(const std::function<void()>& f) {
    f();
    if (!timing_) return;
    be.synchronize();
    int reps = 0;
    auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    do {
      f();
      be.synchronize();
      ++reps;
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (s < 0.2 && reps < 1000);
    seconds_ = s / reps;
  }
  double timed_seconds() const { return seconds_; }
  /// Names of the buffers whose guard bytes were overwritten ("buffer 3").
  std::string broken_guards() const {
    std::string s;
    for (size_t i = 0; i < bufs_.size(); ++i)
      if (!bufs_[i]->guards_intact())
        s += (s.empty() ? "buffer " : ", buffer ") + std::to_string(i);
    return s;
  }

 private:
  void* alloc(size_t bytes) {
    bufs_.push_back(std::make_unique<DevBuf>(be, bytes));
    return bufs_.back()->data();
  }
  bool timing_;
  double seconds_ = 0;
  std::vector<std::unique_ptr<DevBuf>> bufs_;
};

/// ||x - r|| / ||r|| (RMS error relative to the reference's RMS; 0 for two zero vectors, and
/// +inf when either holds a NaN or an infinity the other does not).
inline double normalized_error(const std::vector<float>& x, const std::vector<float>& r) {
  if (x.size() != r.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isfinite(x[i]) != std::isfinite(r[i])) return INFINITY;
    if (!std::isfinite(r[i])) continue;
    num += ((double)x[i] - r[i]) * ((double)x[i] - r[i]);
    den += (double)r[i] * r[i];
  }
  if (num == 0) return 0;
  return std::sqrt(num / std::max(den, 1e-300));
}

/// n normal samples, N(mean, scale^2), from seed.
inline std::vector<float> normal(size_t n, uint64_t seed, float scale = 1.0f, float mean = 0.0f) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(mean, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
/// n integers uniform in [0, hi), from seed.
inline std::vector<int32_t> ids(size_t n, int hi, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = static_cast<int32_t>(g() % hi);
  return v;
}

}  // namespace gt::test
