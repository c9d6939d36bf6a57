// GPU softmax cross-entropy (models/cuda/softmax_cross_entropy) against the float64 CPU reference
// on fresh random logits: mean loss, dlogits and top-1 hits, fp32 (1e-4) and bf16 (2e-2), with
// and without label smoothing; a label out of range gives a NaN loss, not a wild read.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "models/cpu/softmax_cross_entropy.h"
#include "runtime/memory/dtype.h"
#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "models/cuda/softmax_cross_entropy.h"
#include "runtime/cuda/cuda_check.h"
#include "tests/support/device_vector.h"
#include "tests/support/element_values.h"
#include "tests/support/expect_close.h"
#include "tests/support/test_seed.h"
#endif

namespace dtrain::models {
namespace {

#if DTRAIN_WITH_CUDA
struct Case {
  int batch, classes;
  double smoothing;
  bool bf16;
};

template <typename T>
void run_case(const Case& c, bool bad_label) {
  std::mt19937_64 rng(dtrain::test::random_seed());
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  const size_t n = size_t(c.batch) * c.classes;
  std::vector<T> logits(n);
  std::vector<double> logits_exact(n);
  for (size_t i = 0; i < n; ++i) {
    logits[i] = test::narrow<T>(u(rng));
    logits_exact[i] = test::widen(logits[i]);
  }
  std::vector<int32_t> labels(c.batch);
  for (int32_t& l : labels) l = std::uniform_int_distribution<int32_t>(0, c.classes - 1)(rng);
  if (bad_label) labels[c.batch / 2] = c.classes;

  const test::DeviceVector<T> logits_dev(logits), dlogits_dev(n);
  const test::DeviceVector<int32_t> labels_dev(labels), hits_dev(1);
  const test::DeviceVector<float> loss_dev(1);
  cuda::softmax_cross_entropy<T>(nullptr, c.batch, c.classes, logits_dev.get(), labels_dev.get(),
                                 static_cast<float>(c.smoothing), dlogits_dev.get(), {loss_dev.get(), hits_dev.get()});
  DTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
  const float loss = loss_dev.to_host()[0];
  const int32_t hits = hits_dev.to_host()[0];
  const std::vector<T> dlogits = dlogits_dev.to_host();
  if (bad_label) {
    EXPECT_TRUE(std::isnan(loss)) << "a label out of range must poison the loss, got " << loss;
    return;
  }

  std::vector<double> want_grad(n);
  const double want_loss = cpu::softmax_cross_entropy<double>(c.batch, c.classes, logits_exact.data(), labels.data(),
                                                              c.smoothing, want_grad.data());
  EXPECT_NEAR(loss, want_loss, 1e-5 * std::fabs(want_loss) + 1e-6) << "mean loss";
  int want_hits = 0;
  for (int r = 0; r < c.batch; ++r) {
    const double* row = &logits_exact[size_t(r) * c.classes];
    int best = 0;
    for (int j = 1; j < c.classes; ++j) {
      if (row[j] > row[best]) best = j;
    }
    want_hits += best == labels[r];
  }
  EXPECT_EQ(hits, want_hits) << "top-1 hits";
  std::vector<double> got_grad(n);
  for (size_t i = 0; i < n; ++i) got_grad[i] = test::widen(dlogits[i]);
  test::expect_close(got_grad, want_grad, c.bf16 ? 2e-2 : 1e-4, "dlogits");
}

class SoftmaxCrossEntropyGpuTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  }
};

TEST_P(SoftmaxCrossEntropyGpuTest, MatchesFloat64Reference) {
  const Case& c = GetParam();
  if (c.bf16) {
    run_case<runtime::bfloat16>(c, false);
  } else {
    run_case<float>(c, false);
  }
}

TEST_P(SoftmaxCrossEntropyGpuTest, ALabelOutOfRangeGivesANanLoss) {
  const Case& c = GetParam();
  if (c.bf16) {
    run_case<runtime::bfloat16>(c, true);
  } else {
    run_case<float>(c, true);
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (bool bf16 : {false, true}) {
    for (const auto& [batch, classes] :
         std::vector<std::pair<int, int>>{{4, 10}, {3, 7}, {32, 1000}, {256, 1000}, {2, 300}}) {
      for (double smoothing : {0.0, 0.1}) all.push_back({batch, classes, smoothing, bf16});
    }
  }
  return all;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::ostringstream name;
  name << "b" << info.param.batch << "k" << info.param.classes << (info.param.smoothing > 0 ? "_smoothed" : "")
       << (info.param.bf16 ? "_bf16" : "_fp32");
  return name.str();
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftmaxCrossEntropyGpuTest, testing::ValuesIn(cases()), case_name);

#else
TEST(SoftmaxCrossEntropyGpuTest, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::models
