// backend/simt/launch_config.h: a kernel launch's shape, as plain host types that both the
// CUDA build and the SIMT runtime use (and the launch-limit tests check without either).
#pragma once
#include <cstddef>
#include <cstdint>

namespace gt::simt {

/// CUDA's dim3 / uint3.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr Dim3() = default;
  constexpr Dim3(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  constexpr uint64_t count() const { return uint64_t(x) * y * z; }
};

/// <<<grid, block, smem>>>: smem is the dynamic shared memory in bytes.
struct LaunchConfig {
  Dim3 grid, block;
  size_t smem = 0;
};

}  // namespace gt::simt
