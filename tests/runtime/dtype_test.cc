// 16-bit float conversions against a float64 reference on every bit pattern and on fresh random
// floats.
#include "runtime/memory/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "runtime/base/error.h"
#include "tests/support/test_seed.h"

namespace dtrain::runtime {
namespace {

// Reference decoding of IEEE half in float64.
double reference_half(uint16_t bits) {
  const int sign = bits >> 15 ? -1 : 1;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// Reference round-to-nearest-even of x onto a finite grid of candidates, via float64 distances.
template <typename Decode>
uint16_t reference_round(double x, uint16_t candidate_below, uint16_t candidate_above, Decode decode) {
  const double below = decode(candidate_below);
  const double above = decode(candidate_above);
  const double d_below = std::fabs(x - below);
  const double d_above = std::fabs(above - x);
  if (d_below < d_above) return candidate_below;
  if (d_above < d_below) return candidate_above;
  return (candidate_below & 1) == 0 ? candidate_below : candidate_above;
}

TEST(DType, SizesNamesAndParsing) {
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kI32), 4u);
  EXPECT_EQ(dtype_size(DType::kU8), 1u);
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kU8}) {
    EXPECT_EQ(parse_dtype(dtype_name(d), "test"), d);
  }
  EXPECT_THROW(parse_dtype("fp8", "-d"), UsageError);
}

TEST(Float16, EveryBitPatternDecodesExactlyAndRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float16 h{static_cast<uint16_t>(bits)};
    const double expected = reference_half(h.bits);
    const float got = to_float(h);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << bits;
      EXPECT_TRUE(std::isnan(to_float(to_float16(got)))) << bits;
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), expected) << "bits " << bits;
    ASSERT_EQ(to_float16(got).bits, h.bits) << "bits " << bits;
  }
}

TEST(BFloat16, EveryBitPatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const bfloat16 b{static_cast<uint16_t>(bits)};
    const float f = to_float(b);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(to_float(to_bfloat16(f))));
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(f), bits << 16);
    ASSERT_EQ(to_bfloat16(f).bits, b.bits) << bits;
  }
}

TEST(Float16, RandomFloatsRoundToNearestEven) {
  std::mt19937 rng(dtrain::test::random_seed());
  std::uniform_real_distribution<double> magnitude_log(-26, 16.5);
  for (int i = 0; i < 200000; ++i) {
    const float x = static_cast<float>((rng() & 1 ? -1 : 1) * std::exp2(magnitude_log(rng)));
    const float16 got = to_float16(x);
    const double ax = std::fabs(static_cast<double>(x));
    if (ax >= 65520.0) {
      ASSERT_EQ(got.bits & 0x7fff, 0x7c00) << x;
      continue;
    }
    // Positive halves are ordered like their encodings: binary-search the last one <= |x|.
    uint16_t below = 0;
    uint16_t high = 0x7bff;
    while (below < high) {
      const uint16_t mid = static_cast<uint16_t>((below + high + 1) / 2);
      if (reference_half(mid) <= ax) {
        below = mid;
      } else {
        high = static_cast<uint16_t>(mid - 1);
      }
    }
    const uint16_t above = static_cast<uint16_t>(below + 1);
    const uint16_t expected = reference_round(ax, below, above, reference_half);
    ASSERT_EQ(got.bits & 0x7fff, expected) << "x=" << x;
    ASSERT_EQ(got.bits >> 15, x < 0 ? 1 : 0) << "x=" << x;
  }
}

TEST(BFloat16, RandomFloatsRoundToNearestEven) {
  std::mt19937 rng(dtrain::test::random_seed());
  // 0x7f80 (infinity) stands in the rounding grid at 2^128, where the next finite value would be.
  auto decode = [](uint16_t bits) {
    return bits == 0x7f80 ? std::ldexp(1.0, 128) : static_cast<double>(std::bit_cast<float>(uint32_t{bits} << 16));
  };
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = rng() & 0x7f7fffffu;  // finite, positive
    const float x = std::bit_cast<float>(bits);
    const uint16_t below = static_cast<uint16_t>(bits >> 16);
    const uint16_t expected = reference_round(static_cast<double>(x), below, static_cast<uint16_t>(below + 1), decode);
    ASSERT_EQ(to_bfloat16(x).bits, expected) << "x=" << x;
    ASSERT_EQ(to_bfloat16(-x).bits, expected | 0x8000u);
  }
}

}  // namespace
}  // namespace dtrain::runtime
