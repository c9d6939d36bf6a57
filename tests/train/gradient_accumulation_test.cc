// The gradient-accumulation fold (train/engine/gradient_accumulation.h) on fresh random inputs:
// K micro-batches' gradients, folded range by range in backward's order as an engine's listener
// folds them, leave the buffer at their mean, against a float64 reference; the micro-batches
// before the last leave the gradient buffer itself alone; one micro-batch changes nothing.
#include "train/engine/gradient_accumulation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/base/error.h"
#include "tests/support/test_seed.h"

namespace dtrain::train {
namespace {

TEST(GradientAccumulation, FoldsKMicroBatchesIntoTheirMean) {
  std::mt19937_64 rng(test::random_seed());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t count = 10007;
  for (const int k : {2, 3, 7}) {
    std::vector<std::vector<float>> micro(static_cast<size_t>(k), std::vector<float>(count));
    for (auto& g : micro) {
      for (float& v : g) v = u(rng) * (rng() % 4 == 0 ? 1e-4f : 1.0f);  // mixed magnitudes
    }
    std::vector<float> grads(count), sum(count, std::nanf(""));  // the sum starts as garbage
    for (int m = 0; m < k; ++m) {
      grads = micro[static_cast<size_t>(m)];  // backward writes, it does not add
      const std::vector<float> written = grads;
      // Ranges of awkward lengths, reported back to front as backward reports them.
      for (size_t end = count; end > 0;) {
        const size_t begin = end - std::min(end, size_t{1} + rng() % 1500);
        accumulate_gradient_range(MicroBatch{m, k}, grads.data() + begin, sum.data() + begin, end - begin);
        end = begin;
      }
      if (m + 1 < k) {
        EXPECT_EQ(grads, written) << "micro-batch " << m << " of " << k << " changed the gradients";
      }
    }
    // k - 1 fp32 adds and one division: each rounding errs by at most an ulp of what it rounds, so
    // the error is within (k + 1) eps x the mean of the magnitudes (a cancelling sum has a tiny
    // mean but not a tiny error); `worst` is the largest error in units of that bound.
    double worst = 0;
    for (size_t i = 0; i < count; ++i) {
      double exact = 0, magnitude = 0;
      for (const auto& g : micro) {
        exact += g[i];
        magnitude += std::fabs(g[i]);
      }
      const double bound = (k + 1) * double{FLT_EPSILON} * magnitude / k;
      worst = std::max(worst, std::fabs(grads[i] - exact / k) / bound);
    }
    EXPECT_LE(worst, 1.0) << "K = " << k;
  }
}

TEST(GradientAccumulation, OneMicroBatchIsAPlainStep) {
  std::vector<float> grads = {1.5f, -2.0f, 3.25f}, sum = {7.0f, 7.0f, 7.0f};
  accumulate_gradient_range(MicroBatch{0, 1}, grads.data(), sum.data(), grads.size());
  EXPECT_EQ(grads, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(sum, (std::vector<float>{7.0f, 7.0f, 7.0f}));
  EXPECT_TRUE(MicroBatch{}.last());
}

TEST(GradientAccumulation, AMicroBatchOutsideItsStepIsAnError) {
  EXPECT_THROW(check_micro_batch(MicroBatch{3, 3}), runtime::Error);
  EXPECT_THROW(check_micro_batch(MicroBatch{-1, 3}), runtime::Error);
  EXPECT_THROW(check_micro_batch(MicroBatch{0, 0}), runtime::Error);
  EXPECT_NO_THROW(check_micro_batch(MicroBatch{2, 3}));
}

}  // namespace
}  // namespace dtrain::train
