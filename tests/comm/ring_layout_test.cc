// Pure pieces of the ring: chunk layout and host kernels against float64 references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "comm/host/host_reduce.h"
#include "comm/host/ring.h"
#include "runtime/base/error.h"
#include "tests/support/test_seed.h"

namespace dtrain::comm {
namespace {

TEST(EvenChunks, CoverTheBufferWithSizesDifferingByAtMostOne) {
  for (int n = 1; n <= 9; ++n) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{8}, size_t{1000003}}) {
      const std::vector<size_t> offsets = even_chunks(count, n);
      ASSERT_EQ(offsets.size(), static_cast<size_t>(n) + 1);
      EXPECT_EQ(offsets.front(), 0u);
      EXPECT_EQ(offsets.back(), count);
      size_t smallest = count, largest = 0;
      for (int i = 0; i < n; ++i) {
        const size_t len = offsets[static_cast<size_t>(i) + 1] - offsets[static_cast<size_t>(i)];
        smallest = std::min(smallest, len);
        largest = std::max(largest, len);
      }
      EXPECT_LE(largest - smallest, 1u) << "n=" << n << " count=" << count;
    }
  }
}

TEST(HostReduce, AddScaledMatchesFloat64) {
  std::mt19937 rng(dtrain::test::random_seed());
  std::uniform_real_distribution<float> dist(-10, 10);
  const size_t n = 10007;
  std::vector<float> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = dist(rng);
    b[i] = dist(rng);
  }
  add_scaled(out.data(), a.data(), b.data(), n, 0.25f);
  for (size_t i = 0; i < n; ++i) {
    const double want = (double(a[i]) + double(b[i])) * 0.25;
    ASSERT_NEAR(out[i], want, 1e-6 * (std::fabs(a[i]) + std::fabs(b[i]))) << i;
  }
}

// Values that vectorized conversions get wrong first: NaN, infinities, overflow to infinity when
// rounded, -0, subnormals (of fp32 and of the 16-bit format), ties to even of both parities.
std::vector<float> special_values(bool bf16) {
  const float ulp1 = std::ldexp(1.0f, bf16 ? -7 : -10);  // the 16-bit format's ulp at 1
  return {NAN,
          -NAN,
          INFINITY,
          -INFINITY,
          -0.0f,
          0.0f,
          std::numeric_limits<float>::denorm_min(),
          -std::numeric_limits<float>::min(),
          std::numeric_limits<float>::max(),
          bf16 ? -3.39e38f : -65520.0f,                           // rounds to -inf
          bf16 ? std::ldexp(1.0f, -133) : std::ldexp(1.0f, -25),  // the 16-bit format's subnormal range
          1.0f + ulp1 / 2,                                        // tie: stays 1 (even)
          1.0f + 3 * ulp1 / 2};                                   // tie: rounds up to 1 + 2 ulp (even)
}

// Random values with the special ones at the start, the middle and the end (n permitting).
std::vector<float> with_specials(size_t n, bool bf16, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-4, 4);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  const std::vector<float> special = special_values(bf16);
  for (size_t k = 0; k < special.size() && k < n; ++k) {
    v[k] = special[k];
    v[n / 2 + k < n ? n / 2 + k : k] = special[k];
    v[n - 1 - k] = special[k];
  }
  return v;
}

uint16_t narrow_bits(float v, bool bf16) {
  return bf16 ? runtime::to_bfloat16(v).bits : runtime::to_float16(v).bits;
}
float widen_bits(uint16_t bits, bool bf16) {
  return bf16 ? runtime::to_float(runtime::bfloat16{bits}) : runtime::to_float(runtime::float16{bits});
}
uint32_t float_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

// Counts around the vector widths of the vectorized loops (AVX2 and baseline clones alike: the
// machine running the test picks one) and a large odd one.
const size_t kCounts[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 4099};

TEST(HostReduce, NarrowRoundsOnceAndWidenIsExact) {
  const uint64_t seed = dtrain::test::random_seed();
  std::mt19937 rng(seed);
  for (runtime::DType dtype : {runtime::DType::kF16, runtime::DType::kBF16}) {
    const bool bf16 = dtype == runtime::DType::kBF16;
    for (size_t n : kCounts) {
      const std::vector<float> in = with_specials(n, bf16, rng);
      std::vector<uint16_t> narrow(n);
      std::vector<float> back(n);
      narrow_from_f32(in.data(), 0.5f, narrow.data(), dtype, n);
      widen_to_f32(narrow.data(), dtype, back.data(), n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(narrow[i], narrow_bits(in[i] * 0.5f, bf16)) << runtime::dtype_name(dtype) << " n " << n << " element "
                                                              << i << " value " << in[i] << " (seed " << seed << ")";
        ASSERT_EQ(float_bits(back[i]), float_bits(widen_bits(narrow[i], bf16)))
            << runtime::dtype_name(dtype) << " n " << n << " element " << i << " (seed " << seed << ")";
      }
    }
  }
  std::vector<float> in(1), back(1);
  EXPECT_THROW(widen_to_f32(in.data(), runtime::DType::kI32, back.data(), 1), runtime::Error);
}

// The 16-bit add of the partials ring: widen exactly, add and scale in fp32, round once; bitwise
// what runtime/memory/dtype.h's conversions give, also for infinities, NaN, -0, subnormals and ties.
TEST(HostReduce, AddScaled16RoundsTheFp32SumOnce) {
  const uint64_t seed = dtrain::test::random_seed();
  std::mt19937 rng(seed);
  for (runtime::DType dtype : {runtime::DType::kF16, runtime::DType::kBF16}) {
    const bool bf16 = dtype == runtime::DType::kBF16;
    for (size_t n : kCounts) {
      const std::vector<float> fa = with_specials(n, bf16, rng), fb = with_specials(n, bf16, rng);
      std::vector<uint16_t> a(n), b(n), out(n);
      for (size_t i = 0; i < n; ++i) {
        a[i] = narrow_bits(fa[i], bf16);
        b[i] = narrow_bits(i % 3 == 0 ? 1.0f : fb[n - 1 - i], bf16);  // specials meet ordinary values too
      }
      for (float scale : {1.0f, 0.25f}) {
        add_scaled_16(out.data(), a.data(), b.data(), dtype, n, scale);
        for (size_t i = 0; i < n; ++i) {
          const uint16_t want = narrow_bits((widen_bits(a[i], bf16) + widen_bits(b[i], bf16)) * scale, bf16);
          ASSERT_EQ(out[i], want) << runtime::dtype_name(dtype) << " n " << n << " element " << i << " scale " << scale
                                  << " (seed " << seed << ")";
        }
      }
      // In place.
      std::vector<uint16_t> in_place = a;
      add_scaled_16(in_place.data(), in_place.data(), b.data(), dtype, n, 1.0f);
      add_scaled_16(out.data(), a.data(), b.data(), dtype, n, 1.0f);
      EXPECT_EQ(in_place, out) << runtime::dtype_name(dtype) << " n " << n;
    }
  }
  std::vector<float> f(4);
  EXPECT_THROW(add_scaled_16(f.data(), f.data(), f.data(), runtime::DType::kF32, 4, 1.0f), runtime::Error);
}

}  // namespace
}  // namespace dtrain::comm
