// Pure pieces of the ring: chunk layout and host kernels against float64 references.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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

TEST(HostReduce, NarrowRoundsOnceAndWidenIsExact) {
  std::mt19937 rng(dtrain::test::random_seed());
  std::uniform_real_distribution<float> dist(-4, 4);
  const size_t n = 4099;
  std::vector<float> in(n), back(n);
  for (float& v : in) v = dist(rng);
  for (runtime::DType dtype : {runtime::DType::kF16, runtime::DType::kBF16}) {
    std::vector<uint16_t> narrow(n);
    narrow_from_f32(in.data(), 0.5f, narrow.data(), dtype, n);
    widen_to_f32(narrow.data(), dtype, back.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const float direct = dtype == runtime::DType::kF16 ? runtime::to_float(runtime::to_float16(in[i] * 0.5f))
                                                         : runtime::to_float(runtime::to_bfloat16(in[i] * 0.5f));
      ASSERT_EQ(back[i], direct) << runtime::dtype_name(dtype) << " element " << i;
    }
  }
  EXPECT_THROW(widen_to_f32(in.data(), runtime::DType::kI32, back.data(), 1), runtime::Error);
}

// The 16-bit add of the partials ring: widen exactly, add and scale in fp32, round once; bitwise
// what runtime/memory/dtype.h's conversions give, also for infinities, NaN and ties.
TEST(HostReduce, AddScaled16RoundsTheFp32SumOnce) {
  const uint64_t seed = dtrain::test::random_seed();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4, 4);
  const size_t n = 4099;
  for (runtime::DType dtype : {runtime::DType::kF16, runtime::DType::kBF16}) {
    const bool bf16 = dtype == runtime::DType::kBF16;
    auto narrow = [&](float v) { return bf16 ? runtime::to_bfloat16(v).bits : runtime::to_float16(v).bits; };
    auto widen = [&](uint16_t bits) {
      return bf16 ? runtime::to_float(runtime::bfloat16{bits}) : runtime::to_float(runtime::float16{bits});
    };
    std::vector<uint16_t> a(n), b(n), out(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = narrow(dist(rng));
      b[i] = narrow(dist(rng));
    }
    // Special values at the front: +inf + 1, NaN + 1, a tie (1 + half an ulp of 1).
    a[0] = narrow(INFINITY);
    b[0] = narrow(1.0f);
    a[1] = narrow(NAN);
    a[2] = narrow(1.0f);
    b[2] = narrow(std::ldexp(1.0f, bf16 ? -8 : -11));
    for (float scale : {1.0f, 0.25f}) {
      add_scaled_16(out.data(), a.data(), b.data(), dtype, n, scale);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t want = narrow((widen(a[i]) + widen(b[i])) * scale);
        ASSERT_EQ(out[i], want) << runtime::dtype_name(dtype) << " element " << i << " scale " << scale << " (seed "
                                << seed << ")";
      }
    }
    // In place.
    std::vector<uint16_t> in_place = a;
    add_scaled_16(in_place.data(), in_place.data(), b.data(), dtype, n, 1.0f);
    add_scaled_16(out.data(), a.data(), b.data(), dtype, n, 1.0f);
    EXPECT_EQ(in_place, out) << runtime::dtype_name(dtype);
  }
  std::vector<float> f(4);
  EXPECT_THROW(add_scaled_16(f.data(), f.data(), f.data(), runtime::DType::kF32, 4, 1.0f), runtime::Error);
}

}  // namespace
}  // namespace dtrain::comm
