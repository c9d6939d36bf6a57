// GPU validation metrics (models/cuda/classification_metrics) against a float64 reference on fresh
// random logits with many ties: loss sum, top-1, top-5 and image counts, accumulated over several
// batches, fp32 and bf16; a row with a NaN logit or a label out of range is never a hit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "runtime/memory/dtype.h"
#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "models/cuda/classification_metrics.h"
#include "runtime/cuda/cuda_check.h"
#include "tests/support/device_vector.h"
#include "tests/support/element_values.h"
#include "tests/support/test_seed.h"
#endif

namespace dtrain::models {
namespace {

#if DTRAIN_WITH_CUDA
struct Totals {
  double loss = 0;
  long top1 = 0, top5 = 0, images = 0;
};

// The CPU path's rule (train::count_hits), in float64.
void reference_row(const std::vector<double>& z, int classes, int label, Totals* t) {
  ++t->images;
  if (label < 0 || label >= classes) {
    t->loss = NAN;
    return;
  }
  double max = -INFINITY, sum = 0;
  bool finite = true;
  int better = 0;
  for (int j = 0; j < classes; ++j) {
    max = std::fmax(max, z[size_t(j)]);
    finite = finite && std::isfinite(z[size_t(j)]);
    better += z[size_t(j)] > z[size_t(label)];
  }
  for (int j = 0; j < classes; ++j) sum += std::exp(z[size_t(j)] - max);
  t->loss += max + std::log(sum) - z[size_t(label)];
  if (!finite) return;
  t->top1 += better == 0;
  t->top5 += better < 5;
}

template <typename T>
void run(int batch, int classes, bool poison) {
  const uint64_t seed = dtrain::test::random_seed();
  std::printf("seed %llu, batch %d, classes %d\n", static_cast<unsigned long long>(seed), batch, classes);
  std::mt19937_64 rng(seed);
  // Integer logits in a small range: ties with the label's logit are common.
  std::uniform_int_distribution<int> value(-3, 3);
  const test::DeviceVector<cuda::EvalAccumulators> totals_dev(std::vector<cuda::EvalAccumulators>(1, {0, 0, 0, 0}));
  Totals want;
  for (int round = 0; round < 3; ++round) {
    std::vector<T> logits(size_t(batch) * classes);
    std::vector<int32_t> labels(static_cast<size_t>(batch));
    for (T& v : logits) v = test::narrow<T>(value(rng) * 0.5);
    for (int32_t& l : labels) l = std::uniform_int_distribution<int32_t>(0, classes - 1)(rng);
    if (poison && round == 1) {
      logits[size_t(batch / 2) * classes + 1] = test::narrow<T>(std::numeric_limits<double>::quiet_NaN());
      labels[0] = classes;  // out of range
    }
    // The last round counts only the first rows, as for a partial last batch.
    const int rows = round == 2 ? std::max(1, batch / 3) : batch;
    for (int r = 0; r < rows; ++r) {
      std::vector<double> z(static_cast<size_t>(classes));
      for (int j = 0; j < classes; ++j) z[size_t(j)] = test::widen(logits[size_t(r) * classes + size_t(j)]);
      reference_row(z, classes, labels[size_t(r)], &want);
    }
    const test::DeviceVector<T> logits_dev(logits);
    const test::DeviceVector<int32_t> labels_dev(labels);
    cuda::accumulate_classification_metrics<T>(nullptr, rows, classes, logits_dev.get(), labels_dev.get(),
                                               totals_dev.get());
  }
  DTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
  const cuda::EvalAccumulators got = totals_dev.to_host()[0];
  EXPECT_EQ(static_cast<long>(got.images), want.images);
  EXPECT_EQ(static_cast<long>(got.top1), want.top1) << "top-1";
  EXPECT_EQ(static_cast<long>(got.top5), want.top5) << "top-5";
  if (poison) {
    EXPECT_TRUE(std::isnan(got.loss_sum)) << "a bad label must poison the loss, got " << got.loss_sum;
  } else {
    EXPECT_NEAR(got.loss_sum, want.loss, 1e-5 * std::fabs(want.loss) + 1e-5) << "loss sum";
  }
}

class ClassificationMetricsGpuTest : public testing::Test {
 protected:
  void SetUp() override {
    if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  }
};

TEST_F(ClassificationMetricsGpuTest, MatchesFloat64ReferenceWithTies) {
  for (const auto& [batch, classes] : std::vector<std::pair<int, int>>{{1, 7}, {3, 7}, {256, 100}, {257, 1000}}) {
    run<float>(batch, classes, false);
    run<runtime::bfloat16>(batch, classes, false);
  }
}

TEST_F(ClassificationMetricsGpuTest, NanLogitsAndBadLabelsAreNeverHits) {
  run<float>(16, 10, true);
  run<runtime::bfloat16>(16, 10, true);
}
#else
TEST(ClassificationMetricsGpuTest, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::models
