// core/dtype.h: element types greentrain knows by name and size. Only f32 is
// computed on by the fp32 engine; the others are the names the precision policy
// and the CUDA backend use (bf16, f16, and the two OCP FP8 formats of Micikevicius
// et al., "FP8 Formats for Deep Learning", 2022).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace gt {

enum class DType : uint8_t { f32, bf16, f16, f8e4m3, f8e5m2, i32, u16 };

/// Size of one element in bytes.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::i32:
      return 4;
    case DType::bf16:
      return 2;
    case DType::f16:
      return 2;
    case DType::u16:
      return 2;
    case DType::f8e4m3:
      return 1;
    case DType::f8e5m2:
      return 1;
  }
  return 0;
}

/// fp32 -> bf16, round to nearest even (NaN stays a quiet NaN), as PyTorch's and oneDNN's
/// conversion.
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
/// bf16 -> fp32 (exact).
inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Lower-case name: "f32", "bf16", "f16", "f8e4m3", "f8e5m2", "i32", "u16".
std::string_view dtype_name(DType t);
/// Name as safetensors writes it: "F32", "BF16", "F16", "F8_E4M3", "F8_E5M2", "I32", "U16".
std::string_view dtype_safetensors_name(DType t);
/// Inverse of dtype_safetensors_name; throws gt::Error naming the string otherwise.
DType dtype_from_safetensors_name(std::string_view s);

}  // namespace gt
