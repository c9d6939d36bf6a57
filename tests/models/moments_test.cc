// Batch norm's moments (models/cuda/moments.h) on the host: exact counts past 2^24 values, and
// mean and centred sum of squares against a float64 reference.
#include "models/cuda/moments.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tests/support/test_seed.h"

namespace dtrain::models::cuda {
namespace {

TEST(Moments, CountIsExactPastTwoToThe24) {
  // A float count would stay at 2^24: 2^24 + 1 rounds back down.
  Moments m{0, 0, 0};
  const int64_t values = (int64_t{1} << 24) + 3;
  for (int64_t i = 0; i < values; ++i) add_value(m, 2.5f);
  EXPECT_EQ(m.n, values);
  EXPECT_EQ(m.mean, 2.5f);
  EXPECT_EQ(m.m2, 0.0f);
  const Moments merged = merge(Moments{int64_t{1} << 24, 1.0f, 0.0f}, Moments{1, 1.0f, 0.0f});
  EXPECT_EQ(merged.n, (int64_t{1} << 24) + 1);
}

TEST(Moments, MergeOfPartialsMatchesFloat64Reference) {
  std::mt19937_64 rng(test::random_seed());
  std::normal_distribution<float> value(3.0f, 2.0f);
  std::uniform_int_distribution<int> length(0, 3000);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> all;
    Moments total{0, 0, 0};
    for (int part = 0; part < 7; ++part) {
      Moments m{0, 0, 0};
      const int n = length(rng);
      for (int i = 0; i < n; ++i) {
        const float v = value(rng);
        all.push_back(v);
        add_value(m, v);
      }
      total = merge(total, m);
    }
    double mean = 0;
    for (float v : all) mean += v;
    mean /= std::max<size_t>(all.size(), 1);
    double m2 = 0;
    for (float v : all) m2 += (v - mean) * (v - mean);
    ASSERT_EQ(total.n, static_cast<int64_t>(all.size()));
    if (all.empty()) continue;
    EXPECT_NEAR(total.mean, mean, 1e-4 * (1 + std::abs(mean))) << "trial " << trial;
    EXPECT_NEAR(total.m2 / total.n, m2 / all.size(), 1e-4 * (m2 / all.size())) << "trial " << trial;
  }
}

}  // namespace
}  // namespace dtrain::models::cuda
