// The training step's GPU kernels against the host code and a float64 reference, on fresh random
// inputs: the fused SGD update (fp32 and bf16 gradients, plain and Nesterov, per-range weight
// decay, the bf16 weight copy) over three steps, the middle one reading its learning rate from
// device memory (as a replayed CUDA graph does), and the input normalize-and-cast kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/memory/dtype.h"
#include "runtime/rank/gpu_binding.h"
#include "train/data/data_loader.h"
#include "train/engine/sgd.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "tests/support/device_vector.h"
#include "tests/support/test_seed.h"
#include "train/engine/cuda/normalize_images.h"
#include "train/engine/cuda/sgd_update.h"
#endif

namespace dtrain::train {
namespace {

#if DTRAIN_WITH_CUDA
using test::DeviceVector;

class StepKernelsGpuTest : public testing::Test {
 protected:
  void SetUp() override {
    if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  }
};

void check_sgd(bool nesterov, bool bf16_grads) {
  std::mt19937_64 rng(dtrain::test::random_seed());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t count = 100003;
  // Ranges of awkward lengths alternating between decay and none (BN and bias excluded), with the
  // learning-rate scales of fine-tuning: the schedule's, a backbone's 0.1, and frozen (0).
  std::vector<DecayRange> ranges;
  const float scales[] = {1.0f, 0.1f, 0.0f};
  for (size_t begin = 0; begin < count;) {
    const size_t end = std::min(count, begin + 1 + rng() % 5000);
    ranges.push_back({begin, end, ranges.size() % 2 == 0 ? 5e-4f : 0.0f, scales[ranges.size() % 3]});
    begin = end;
  }
  std::vector<cuda::DecayRangeEnd> ends;
  for (const DecayRange& r : ranges) ends.push_back({r.end, r.weight_decay, r.lr_scale});
  SgdOptions options{0.9, 5e-4, nesterov};
  Sgd host(count, ranges, options);
  std::vector<float> params(count);
  for (float& p : params) p = u(rng);
  std::vector<double> exact_params(params.begin(), params.end()), exact_momentum(count, 0.0);
  const DeviceVector<float> params_dev(params), momentum_dev(count);
  const DeviceVector<cuda::DecayRangeEnd> ends_dev(ends);
  const DeviceVector<runtime::bfloat16> copy_dev(count);
  const DeviceVector<float> lr_dev(1);
  for (int step = 0; step < 3; ++step) {
    const float lr = 0.1f * (step + 1);
    std::vector<float> grads(count);
    std::vector<runtime::bfloat16> grads_bf16(count);
    for (size_t i = 0; i < count; ++i) {
      grads[i] = u(rng);
      if (bf16_grads) {
        grads_bf16[i] = runtime::to_bfloat16(grads[i]);
        grads[i] = runtime::to_float(grads_bf16[i]);
      }
    }
    cuda::SgdStep s{count, params_dev.get(), momentum_dev.get(), ends_dev.get(), static_cast<int>(ends.size()), lr,
                    0.9f,  nesterov,         copy_dev.get()};
    if (step == 1) {  // as a replayed CUDA graph reads it: from device memory, the argument ignored
      cuda::set_device_lr(nullptr, lr_dev.get(), lr);
      s.lr = -7.0f;
      s.lr_on_device = lr_dev.get();
    }
    if (bf16_grads) {
      const DeviceVector<runtime::bfloat16> g(grads_bf16);
      cuda::sgd_update(nullptr, s, g.get());
      DTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
    } else {
      const DeviceVector<float> g(grads);
      cuda::sgd_update(nullptr, s, g.get());
      DTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
    }
    host.step(params.data(), grads.data(), lr);
    size_t r = 0;
    for (size_t i = 0; i < count; ++i) {
      while (ranges[r].end <= i) ++r;
      if (ranges[r].lr_scale == 0) continue;  // frozen: parameter and momentum untouched
      const double g = grads[i] + ranges[r].weight_decay * exact_params[i];
      exact_momentum[i] = 0.9 * exact_momentum[i] + g;
      exact_params[i] -= lr * ranges[r].lr_scale * (nesterov ? g + 0.9 * exact_momentum[i] : exact_momentum[i]);
    }
  }
  const std::vector<float> got = params_dev.to_host();
  const std::vector<float> momentum_got = momentum_dev.to_host();
  size_t frozen_moved = 0, r = 0;
  for (size_t i = 0; i < count; ++i) {
    while (ranges[r].end <= i) ++r;
    frozen_moved +=
        ranges[r].lr_scale == 0 && (momentum_got[i] != 0.0f || got[i] != static_cast<float>(exact_params[i]));
  }
  EXPECT_EQ(frozen_moved, 0u) << "frozen elements whose parameter or momentum changed";
  const std::vector<runtime::bfloat16> copy = copy_dev.to_host();
  size_t not_bitwise = 0, not_close = 0, bad_copy = 0;
  for (size_t i = 0; i < count; ++i) {
    not_bitwise += std::memcmp(&got[i], &params[i], sizeof(float)) != 0;
    not_close += !(std::fabs(got[i] - exact_params[i]) <= 1e-5 * (1 + std::fabs(exact_params[i])));
    bad_copy += copy[i].bits != runtime::to_bfloat16(got[i]).bits;
  }
  EXPECT_EQ(not_bitwise, 0u) << "elements differing from the host Sgd";
  EXPECT_EQ(not_close, 0u) << "elements off the float64 reference";
  EXPECT_EQ(bad_copy, 0u) << "bf16 copies that are not the rounded master weight";
}

TEST_F(StepKernelsGpuTest, SgdMatchesHostAndFloat64) {
  check_sgd(false, false);
}
TEST_F(StepKernelsGpuTest, SgdNesterovMatchesHostAndFloat64) {
  check_sgd(true, false);
}
TEST_F(StepKernelsGpuTest, SgdWithBf16GradientsMatchesHostAndFloat64) {
  check_sgd(false, true);
}

TEST_F(StepKernelsGpuTest, NormalizeImagesMatchesTheHostNormalize) {
  std::mt19937_64 rng(dtrain::test::random_seed());
  const ImageShape shape{13, 17, 3};
  const cuda::ImageBatchDims dims{5, 13, 17, 3};
  std::vector<uint8_t> pixels(size_t(5) * shape.bytes());
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng());
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std_dev[3] = {0.229f, 0.224f, 0.225f};
  std::vector<float> host_nchw(pixels.size()), host_nhwc(pixels.size());
  normalize_batch(pixels.data(), 5, shape, mean, std_dev, PixelLayout::kNchw, host_nchw.data());
  normalize_batch(pixels.data(), 5, shape, mean, std_dev, PixelLayout::kNhwc, host_nhwc.data());
  const DeviceVector<uint8_t> pixels_dev(pixels);
  const DeviceVector<float> nchw_dev(pixels.size());
  const DeviceVector<runtime::bfloat16> nhwc_dev(pixels.size());
  cuda::normalize_images_nchw_f32(nullptr, dims, pixels_dev.get(), mean, std_dev, nchw_dev.get());
  cuda::normalize_images_nhwc_bf16(nullptr, dims, pixels_dev.get(), mean, std_dev, nhwc_dev.get());
  DTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> nchw = nchw_dev.to_host();
  const std::vector<runtime::bfloat16> nhwc = nhwc_dev.to_host();
  size_t f32_wrong = 0, bf16_wrong = 0, off_exact = 0;
  const size_t plane = 13 * 17;
  for (size_t i = 0; i < pixels.size(); ++i) {
    f32_wrong += std::memcmp(&nchw[i], &host_nchw[i], sizeof(float)) != 0;
    bf16_wrong += nhwc[i].bits != runtime::to_bfloat16(host_nhwc[i]).bits;
    // float64: pixel i of the NHWC input is (image, p, c); its NCHW place is (image, c, p).
    const size_t c = i % 3, pixel = i / 3, image = pixel / plane, p = pixel % plane;
    const double exact = (pixels[i] / 255.0 - mean[c]) / std_dev[c];
    off_exact += !(std::fabs(nchw[(image * 3 + c) * plane + p] - exact) <= 1e-6 * (1 + std::fabs(exact)));
  }
  EXPECT_EQ(f32_wrong, 0u) << "fp32 NCHW elements differing from normalize_batch";
  EXPECT_EQ(bf16_wrong, 0u) << "bf16 NHWC elements that are not normalize_batch's value rounded";
  EXPECT_EQ(off_exact, 0u) << "fp32 elements off the float64 value";
}

#else
TEST(StepKernelsGpuTest, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::train
