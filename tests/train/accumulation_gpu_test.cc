// Gradient accumulation on the GPU, on fresh random inputs:
//  - the device fold (train/engine/cuda/accumulate_gradients.h) gives the host fold's floats bit
//    for bit, and their mean within a few ulps of float64;
//  - GpuTrainStep with K micro-batches of B per step ends where one step on the K x B images ends,
//    on a BN-free model: fp32 NCHW with TF32 off within 1e-5 relative per parameter (as the rank-
//    equivalence tests); bf16 NHWC, whose weight gradients are rounded to bf16 per backward before
//    the fp32 sum, within 5% of the parameters' total movement (norm of the difference of the
//    updates over the norm of the update; a lost micro-batch or a missing 1/K is 30% to 200%).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "runtime/rank/gpu_binding.h"
#include "train/engine/gradient_accumulation.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/base/error.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/memory/buffer.h"
#include "tests/support/device_vector.h"
#include "tests/support/test_seed.h"
#include "train/engine/cuda/accumulate_gradients.h"
#include "train/engine/cuda/gpu_train_step.h"
#endif

namespace dtrain::train {
namespace {

#if DTRAIN_WITH_CUDA
using test::DeviceVector;

class AccumulationGpuTest : public testing::Test {
 protected:
  void SetUp() override {
    if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  }
};

TEST_F(AccumulationGpuTest, FoldMatchesTheHostFoldAndFloat64) {
  std::mt19937_64 rng(test::random_seed());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t count = 100003;
  for (const int k : {2, 5}) {
    std::vector<std::vector<float>> micro(static_cast<size_t>(k), std::vector<float>(count));
    for (auto& g : micro) {
      for (float& v : g) v = u(rng) * (rng() % 4 == 0 ? 1e-4f : 1.0f);
    }
    std::vector<float> host_grads, host_sum(count);
    DeviceVector<float> sum(count);
    std::vector<float> device_result;
    for (int m = 0; m < k; ++m) {
      host_grads = micro[static_cast<size_t>(m)];
      accumulate_gradient_range(MicroBatch{m, k}, host_grads.data(), host_sum.data(), count);
      const DeviceVector<float> grads(micro[static_cast<size_t>(m)]);
      // Two ranges, as backward reports them: the back part first.
      const size_t cut = count / 3;
      cuda::accumulate_gradients(nullptr, MicroBatch{m, k}, grads.get() + cut, sum.get() + cut, count - cut);
      cuda::accumulate_gradients(nullptr, MicroBatch{m, k}, grads.get(), sum.get(), cut);
      DTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
      if (m + 1 == k) device_result = grads.to_host();
    }
    ASSERT_EQ(device_result.size(), count);
    double worst = 0;  // in units of the bound (k + 1) eps x mean magnitude, as the host test
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(device_result[i], host_grads[i]) << "element " << i << ", K = " << k;
      double exact = 0, magnitude = 0;
      for (const auto& g : micro) {
        exact += g[i];
        magnitude += std::fabs(g[i]);
      }
      worst =
          std::max(worst, std::fabs(device_result[i] - exact / k) / ((k + 1) * double{FLT_EPSILON} * magnitude / k));
    }
    EXPECT_LE(worst, 1.0) << "K = " << k;
  }
}

// Parameters after `steps` steps of K micro-batches of B (whole: of one batch of K x B), on the
// same images and from the same initialization (0 steps: the initial values); the mean loss of
// the last step in *loss.
std::vector<float> train(models::cuda::ConvNumerics numerics, int k, bool whole, const runtime::Buffer& images,
                         const runtime::Buffer& labels, int batch, int side, int steps, float* loss) {
  cuda::GpuStepOptions o;
  o.model.blocks_per_stage = {1, 1};
  o.model.bottleneck = false;
  o.model.width = 8;
  o.model.small_input = true;
  o.model.batch_norm = false;
  o.model.num_classes = 10;
  o.model.in_channels = 3;
  o.model.seed = 3;
  o.numerics = numerics;
  o.allow_tf32 = false;
  o.height = o.width = side;
  o.sgd = SgdOptions{0.9, 1e-4, false};
  o.batch = whole ? batch * k : batch;
  o.accumulation_steps = whole ? 1 : k;
  cuda::GpuTrainStep step(o, nullptr, 0);
  const size_t image_bytes = size_t{3} * side * side;
  const auto* pixels = static_cast<const uint8_t*>(images.data());
  const auto* label = static_cast<const int32_t*>(labels.data());
  for (int s = 0; s < steps; ++s) {
    const size_t first = static_cast<size_t>(s) * k * batch;  // the step's first image
    if (whole) {
      step.run(pixels + first * image_bytes, label + first, 0.05f);
      continue;
    }
    for (int m = 0; m < k; ++m) {
      const size_t at = first + static_cast<size_t>(m) * batch;
      step.run(pixels + at * image_bytes, label + at, 0.05f, MicroBatch{m, k});
    }
  }
  *loss = steps > 0 ? step.last_result().mean_loss : 0.0f;
  step.synchronize();
  step.model().sync_to_host();
  models::ParameterSet& p = step.model().parameters();
  return std::vector<float>(p.params_flat(), p.params_flat() + p.flat_size());
}

void expect_micro_batches_match_whole_batch(models::cuda::ConvNumerics numerics) {
  std::mt19937 rng(static_cast<unsigned>(test::random_seed()));
  const int k = 3, batch = 4, side = 12, steps = 3;
  const size_t images_count = static_cast<size_t>(steps) * k * batch;
  runtime::Buffer images(runtime::MemoryKind::kPinnedHost, images_count * 3 * side * side);
  runtime::Buffer labels(runtime::MemoryKind::kPinnedHost, images_count * sizeof(int32_t));
  for (size_t i = 0; i < images.bytes(); ++i) static_cast<uint8_t*>(images.data())[i] = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < images_count; ++i) static_cast<int32_t*>(labels.data())[i] = static_cast<int32_t>(rng() % 10);

  float loss_micro = 0, loss_whole = 0, none = 0;
  const std::vector<float> initial = train(numerics, k, true, images, labels, batch, side, 0, &none);
  const std::vector<float> micro = train(numerics, k, false, images, labels, batch, side, steps, &loss_micro);
  const std::vector<float> whole = train(numerics, k, true, images, labels, batch, side, steps, &loss_whole);
  ASSERT_EQ(micro.size(), whole.size());
  ASSERT_EQ(initial.size(), whole.size());
  double worst = 0, difference = 0, moved = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    const double rel = std::fabs(double(micro[i]) - whole[i]) / std::max(1e-3, std::fabs(double(whole[i])));
    if (rel > worst) worst = rel, worst_at = i;
    difference += (double(micro[i]) - whole[i]) * (double(micro[i]) - whole[i]);
    moved += (double(whole[i]) - initial[i]) * (double(whole[i]) - initial[i]);
  }
  const double update_difference = std::sqrt(difference / moved);
  const bool fp32 = numerics == models::cuda::ConvNumerics::kFp32Nchw;
  std::printf(
      "  %s: %d micro-batches of %d vs batch %d, %d steps: worst relative parameter difference %.2e, "
      "difference of the updates %.2e of the update (bound %s), loss %.6f vs %.6f\n",
      fp32 ? "fp32, TF32 off" : "bf16", k, batch, k * batch, steps, worst, update_difference,
      fp32 ? "1e-5 per parameter" : "0.05", loss_micro, loss_whole);
  ASSERT_GT(moved, 0.0) << "the steps should move the parameters";
  if (fp32) {
    EXPECT_LE(worst, 1e-5) << "at parameter " << worst_at;
    EXPECT_NEAR(loss_micro, loss_whole, 1e-5 * std::fabs(loss_whole));
  } else {
    EXPECT_LE(update_difference, 0.05);
    EXPECT_NEAR(loss_micro, loss_whole, 0.02 * std::fabs(loss_whole));
  }
}

TEST_F(AccumulationGpuTest, Fp32MicroBatchesMatchOneStepOnTheirImages) {
  expect_micro_batches_match_whole_batch(models::cuda::ConvNumerics::kFp32Nchw);
}

TEST_F(AccumulationGpuTest, Bf16MicroBatchesMatchOneStepOnTheirImages) {
  expect_micro_batches_match_whole_batch(models::cuda::ConvNumerics::kBf16Nhwc);
}

// A micro-batch of a step of another K than the step was built for is a bug, not a step.
TEST_F(AccumulationGpuTest, AMicroBatchOfAnotherKIsAnError) {
  runtime::Buffer images(runtime::MemoryKind::kPinnedHost, size_t{4} * 3 * 12 * 12);
  runtime::Buffer labels(runtime::MemoryKind::kPinnedHost, 4 * sizeof(int32_t));
  std::fill_n(static_cast<int32_t*>(labels.data()), 4, 1);
  cuda::GpuStepOptions o;
  o.model.blocks_per_stage = {1};
  o.model.bottleneck = false;
  o.model.width = 4;
  o.model.small_input = true;
  o.model.num_classes = 10;
  o.batch = 4;
  o.height = o.width = 12;
  o.accumulation_steps = 2;
  cuda::GpuTrainStep step(o, nullptr, 0);
  EXPECT_THROW(step.run(static_cast<const uint8_t*>(images.data()), static_cast<const int32_t*>(labels.data()), 0.1f,
                        MicroBatch{0, 3}),
               runtime::Error);
}

#else
TEST(AccumulationGpuTest, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::train
