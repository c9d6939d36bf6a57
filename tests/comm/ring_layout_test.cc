// Pure pieces of the ring: chunk layout and host kernels against float64 references.
#include <gtest/gtest.h>

#include <random>

#include "comm/host_reduce.h"
#include "comm/ring.h"
#include "runtime/core/error.h"

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
  std::mt19937 rng(std::random_device{}());
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
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-4, 4);
  const size_t n = 4099;
  std::vector<float> in(n), back(n);
  for (float& v : in) v = dist(rng);
  for (core::DType dtype : {core::DType::kF16, core::DType::kBF16}) {
    std::vector<uint16_t> narrow(n);
    narrow_from_f32(in.data(), 0.5f, narrow.data(), dtype, n);
    widen_to_f32(narrow.data(), dtype, back.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const float direct = dtype == core::DType::kF16 ? core::to_float(core::to_float16(in[i] * 0.5f))
                                                      : core::to_float(core::to_bfloat16(in[i] * 0.5f));
      ASSERT_EQ(back[i], direct) << core::dtype_name(dtype) << " element " << i;
    }
  }
  EXPECT_THROW(widen_to_f32(in.data(), core::DType::kI32, back.data(), 1), core::Error);
}

}  // namespace
}  // namespace dtrain::comm
