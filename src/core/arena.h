// core/arena.h: a flat, 64-byte aligned allocation carved into named tensors.
// Sizes are planned first (plan), then the memory is taken once from a device (allocate),
// so the peak bytes are known before the first training step.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/memory.h"
#include "core/tensor.h"

namespace gt {

class Arena {
 public:
  explicit Arena(std::string name) : name_(std::move(name)) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  /// Reserves a tensor of `shape` and `dtype`; returns its index. Only before allocate().
  size_t plan(const std::string& tensor_name, Shape shape, DType dtype = DType::f32);
  /// Takes the memory for every planned tensor from `mem` (a Backend) and zeroes it; the
  /// arena gives it back to `mem` when destroyed, so `mem` must outlive it. Throws gt::Error
  /// when out of memory or when called twice.
  void allocate(DeviceMemory& mem);
  /// Zeroes every tensor (through the device that holds them).
  void zero();
  /// The device that holds the memory (null before allocate()).
  DeviceMemory* memory() const { return mem_; }
  /// View of planned tensor i; data is null before allocate().
  Tensor& at(size_t i) { return tensors_[i]; }
  const Tensor& at(size_t i) const { return tensors_[i]; }
  const std::string& tensor_name(size_t i) const { return names_[i]; }
  size_t size() const { return tensors_.size(); }
  /// Total bytes, including 64-byte alignment padding.
  size_t bytes() const { return total_bytes_; }
  const std::string& name() const { return name_; }
  /// Base device pointer of the whole arena (for passes over all tensors at once).
  void* base() const { return base_; }
  bool allocated() const { return base_ != nullptr; }

 private:
  std::string name_;
  std::vector<Tensor> tensors_;
  std::vector<std::string> names_;
  std::vector<size_t> offsets_;
  size_t total_bytes_ = 0;
  void* base_ = nullptr;
  DeviceMemory* mem_ = nullptr;
};

/// Formats a byte count as "12.3 MiB".
std::string format_bytes(size_t bytes);

}  // namespace gt
