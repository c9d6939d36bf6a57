#include "runtime/memory/dtype.h"

#include <bit>
#include <cmath>
#include <string>

#include "runtime/base/error.h"

namespace dtrain::runtime {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kU8: return 1;
  }
  DTRAIN_FAIL() << "unknown dtype " << static_cast<int>(dtype);
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "fp32";
    case DType::kF16: return "fp16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "int32";
    case DType::kU8: return "uint8";
  }
  return "unknown";
}

DType parse_dtype(std::string_view text, std::string_view source) {
  if (text == "fp32" || text == "float" || text == "float32") return DType::kF32;
  if (text == "fp16" || text == "half" || text == "float16") return DType::kF16;
  if (text == "bf16" || text == "bfloat16") return DType::kBF16;
  if (text == "int32") return DType::kI32;
  if (text == "uint8") return DType::kU8;
  DTRAIN_USAGE_FAIL() << source << "='" << text << "' is not a dtype (use fp32, fp16, bf16, int32 or uint8)";
}

float to_float(bfloat16 value) {
  return std::bit_cast<float>(static_cast<uint32_t>(value.bits) << 16);
}

bfloat16 to_bfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return bfloat16{static_cast<uint16_t>((bits >> 16) | 0x40u)};  // stay a quiet NaN
  // Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate.
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return bfloat16{static_cast<uint16_t>((bits + rounding) >> 16)};
}

float to_float(float16 value) {
  const uint32_t sign = static_cast<uint32_t>(value.bits & 0x8000u) << 16;
  const uint32_t exponent = (value.bits >> 10) & 0x1fu;
  const uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent == 0) {
    // Zero or subnormal: mantissa x 2^-24, exact in float.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

float16 to_float16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return float16{static_cast<uint16_t>(sign | 0x7e00u)};
  if (magnitude >= 65520.0f) return float16{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to inf
  if (magnitude < 6.103515625e-05f) {
    // Subnormal half: a multiple of 2^-24. nearbyint rounds ties to even in the default mode.
    const float units = std::nearbyint(std::ldexp(magnitude, 24));
    return float16{static_cast<uint16_t>(sign | static_cast<uint16_t>(units))};
  }
  // Normal: drop 13 mantissa bits with round-to-nearest-even; a carry correctly bumps the exponent.
  const uint32_t abs_bits = bits & 0x7fffffffu;
  const uint32_t rounding = 0xfffu + ((abs_bits >> 13) & 1u);
  const uint32_t rounded = abs_bits + rounding;
  const uint32_t exponent = (rounded >> 23) - 112u;
  const uint32_t mantissa = (rounded >> 13) & 0x3ffu;
  return float16{static_cast<uint16_t>(sign | (exponent << 10) | mantissa)};
}

}  // namespace dtrain::runtime
