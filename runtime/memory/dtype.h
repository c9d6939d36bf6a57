#pragma once
// Element types of tensors and collectives, and the 16-bit float formats.
//
// bfloat16 and float16 are storage types: arithmetic happens in float after an exact widening;
// narrowing rounds to nearest, ties to even, as the GPU's conversion instructions do.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dtrain::runtime {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kU8 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "fp32", "fp16", "bf16", "int32", "uint8"
// Parses the names above (also "float", "half", "bfloat16"); UsageError naming `source` otherwise.
DType parse_dtype(std::string_view text, std::string_view source);

struct bfloat16 {
  uint16_t bits = 0;
};
struct float16 {
  uint16_t bits = 0;
};

float to_float(bfloat16 value);
float to_float(float16 value);
bfloat16 to_bfloat16(float value);
float16 to_float16(float value);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<float16>() {
  return DType::kF16;
}
template <>
constexpr DType dtype_of<bfloat16>() {
  return DType::kBF16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::kU8;
}

}  // namespace dtrain::runtime
