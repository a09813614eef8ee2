#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/arena.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/tensor.h"

namespace gt {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::f8e4m3:
      return "f8e4m3";
    case DType::f8e5m2:
      return "f8e5m2";
    case DType::i32:
      return "i32";
    case DType::u16:
      return "u16";
  }
  return "?";
}

std::string_view dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    case DType::f8e4m3:
      return "F8_E4M3";
    case DType::f8e5m2:
      return "F8_E5M2";
    case DType::i32:
      return "I32";
    case DType::u16:
      return "U16";
  }
  return "?";
}

DType dtype_from_safetensors_name(std::string_view s) {
  for (DType t :
       {DType::f32, DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2, DType::i32, DType::u16})
    if (dtype_safetensors_name(t) == s) return t;
  throw Error(
      fmt::format("unknown safetensors dtype '{}'; expected F32, BF16, F16, F8_E4M3, "
                  "F8_E5M2, I32 or U16",
                  s));
}

std::string Shape::str() const {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")";
}

Arena::~Arena() {
  if (mem_) mem_->deallocate(base_);
}

size_t Arena::plan(const std::string& tensor_name, Shape shape, DType dtype) {
  check(base_ == nullptr, "Arena '" + name_ + "': plan() after allocate()");
  for (auto d : shape.dims)
    check(d > 0, fmt::format("Arena '{}': tensor '{}' has non-positive dimension in shape {}",
                             name_, tensor_name, shape.str()));
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  offsets_.push_back(total_bytes_);
  total_bytes_ += (t.bytes() + 63) / 64 * 64;
  tensors_.push_back(std::move(t));
  names_.push_back(tensor_name);
  return tensors_.size() - 1;
}

void Arena::allocate(DeviceMemory& mem) {
  check(base_ == nullptr, "Arena '" + name_ + "': allocate() twice");
  size_t n = total_bytes_ ? total_bytes_ : 64;
  try {
    base_ = mem.allocate(n);
  } catch (const Error& e) {
    throw Error(fmt::format("Arena '{}': {}", name_, e.what()));
  }
  mem_ = &mem;
  mem.zero(base_, n);
  for (size_t i = 0; i < tensors_.size(); ++i)
    tensors_[i].data = static_cast<char*>(base_) + offsets_[i];
}

void Arena::zero() {
  check(mem_ != nullptr, "Arena '" + name_ + "': zero() before allocate()");
  mem_->zero(base_, total_bytes_);
}

std::string format_bytes(size_t bytes) {
  double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

void* DeviceMemory::allocate_host(size_t bytes) {
  void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  if (!p) throw Error(fmt::format("cannot allocate {} bytes of host memory", bytes));
  return p;
}
void DeviceMemory::deallocate_host(void* p) { std::free(p); }

}  // namespace gt
