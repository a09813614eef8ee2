// core/tensor.h: Tensor is a non-owning view: dtype, shape, device and a pointer
// into an arena. Shapes are int64 and row-major (last dimension contiguous).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace gt {

enum class Device : uint8_t { cpu, cuda };

/// Row-major shape, up to any rank; numel() of an empty shape is 1 (a scalar).
struct Shape {
  std::vector<int64_t> dims;
  Shape() = default;
  Shape(std::initializer_list<int64_t> d) : dims(d) {}
  explicit Shape(std::vector<int64_t> d) : dims(std::move(d)) {}
  int64_t numel() const {
    int64_t n = 1;
    for (auto d : dims) n *= d;
    return n;
  }
  size_t rank() const { return dims.size(); }
  int64_t operator[](size_t i) const { return dims[i]; }
  bool operator==(const Shape&) const = default;
  std::string str() const;  ///< "(2, 3, 4)"
};

/// A view of memory it does not own: dtype, shape, device, pointer.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
  Device device = Device::cpu;

  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  float* f32() const { return static_cast<float*>(data); }
};

}  // namespace gt
