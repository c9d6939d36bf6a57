// The training step's GPU kernels against the host code and a float64 reference, on fresh random
// inputs: the fused SGD update (fp32 and bf16 gradients, plain and Nesterov, per-range weight
// decay, the bf16 weight copy) over three steps, and the input normalize-and-cast kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/core/dtype.h"
#include "runtime/core/gpu_binding.h"
#include "runtime/train/data/data_loader.h"
#include "runtime/train/sgd.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/core/cuda/cuda_check.h"
#include "runtime/train/cuda/normalize_images.h"
#include "runtime/train/cuda/sgd_update.h"
#endif

namespace dtrain::train {
namespace {

#if DTRAIN_WITH_CUDA
template <typename T>
T* to_device(const std::vector<T>& host) {
  T* p = nullptr;
  DTRAIN_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(host.size(), 1) * sizeof(T)));
  DTRAIN_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}
template <typename T>
std::vector<T> to_host(const T* p, size_t n) {
  std::vector<T> host(n);
  DTRAIN_CUDA_CHECK(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

class StepKernelsGpuTest : public testing::Test {
 protected:
  void SetUp() override {
    if (core::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  }
};

void check_sgd(bool nesterov, bool bf16_grads) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t count = 100003;
  // Ranges of awkward lengths alternating between decay and none (BN and bias excluded).
  std::vector<DecayRange> ranges;
  for (size_t begin = 0; begin < count;) {
    const size_t end = std::min(count, begin + 1 + rng() % 5000);
    ranges.push_back({begin, end, ranges.size() % 2 == 0 ? 5e-4f : 0.0f});
    begin = end;
  }
  std::vector<cuda::DecayRangeEnd> ends;
  for (const DecayRange& r : ranges) ends.push_back({r.end, r.weight_decay});
  SgdOptions options{0.9, 5e-4, nesterov};
  Sgd host(count, ranges, options);
  std::vector<float> params(count);
  for (float& p : params) p = u(rng);
  std::vector<double> exact_params(params.begin(), params.end()), exact_momentum(count, 0.0);
  float* params_dev = to_device(params);
  float* momentum_dev = to_device(std::vector<float>(count, 0.0f));
  cuda::DecayRangeEnd* ends_dev = to_device(ends);
  core::bfloat16* copy_dev = to_device(std::vector<core::bfloat16>(count));
  for (int step = 0; step < 3; ++step) {
    const float lr = 0.1f * (step + 1);
    std::vector<float> grads(count);
    std::vector<core::bfloat16> grads_bf16(count);
    for (size_t i = 0; i < count; ++i) {
      grads[i] = u(rng);
      if (bf16_grads) {
        grads_bf16[i] = core::to_bfloat16(grads[i]);
        grads[i] = core::to_float(grads_bf16[i]);
      }
    }
    cuda::SgdStep s{count, params_dev, momentum_dev, ends_dev, static_cast<int>(ends.size()),
                    lr,    0.9f,       nesterov,     copy_dev};
    if (bf16_grads) {
      core::bfloat16* g = to_device(grads_bf16);
      cuda::sgd_update(nullptr, s, g);
      DTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
      cudaFree(g);
    } else {
      float* g = to_device(grads);
      cuda::sgd_update(nullptr, s, g);
      DTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
      cudaFree(g);
    }
    host.step(params.data(), grads.data(), lr);
    size_t r = 0;
    for (size_t i = 0; i < count; ++i) {
      while (ranges[r].end <= i) ++r;
      const double g = grads[i] + ranges[r].weight_decay * exact_params[i];
      exact_momentum[i] = 0.9 * exact_momentum[i] + g;
      exact_params[i] -= lr * (nesterov ? g + 0.9 * exact_momentum[i] : exact_momentum[i]);
    }
  }
  const std::vector<float> got = to_host(params_dev, count);
  const std::vector<core::bfloat16> copy = to_host(copy_dev, count);
  size_t not_bitwise = 0, not_close = 0, bad_copy = 0;
  for (size_t i = 0; i < count; ++i) {
    not_bitwise += std::memcmp(&got[i], &params[i], sizeof(float)) != 0;
    not_close += !(std::fabs(got[i] - exact_params[i]) <= 1e-5 * (1 + std::fabs(exact_params[i])));
    bad_copy += copy[i].bits != core::to_bfloat16(got[i]).bits;
  }
  EXPECT_EQ(not_bitwise, 0u) << "elements differing from the host Sgd";
  EXPECT_EQ(not_close, 0u) << "elements off the float64 reference";
  EXPECT_EQ(bad_copy, 0u) << "bf16 copies that are not the rounded master weight";
  for (void* p : {static_cast<void*>(params_dev), static_cast<void*>(momentum_dev), static_cast<void*>(ends_dev),
                  static_cast<void*>(copy_dev)}) {
    cudaFree(p);
  }
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
  std::mt19937_64 rng(std::random_device{}());
  const ImageShape shape{13, 17, 3};
  const cuda::ImageBatchDims dims{5, 13, 17, 3};
  std::vector<uint8_t> pixels(size_t(5) * shape.bytes());
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng());
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std_dev[3] = {0.229f, 0.224f, 0.225f};
  std::vector<float> host_nchw(pixels.size()), host_nhwc(pixels.size());
  normalize_batch(pixels.data(), 5, shape, mean, std_dev, PixelLayout::kNchw, host_nchw.data());
  normalize_batch(pixels.data(), 5, shape, mean, std_dev, PixelLayout::kNhwc, host_nhwc.data());
  uint8_t* pixels_dev = to_device(pixels);
  float* nchw_dev = to_device(std::vector<float>(pixels.size()));
  core::bfloat16* nhwc_dev = to_device(std::vector<core::bfloat16>(pixels.size()));
  cuda::normalize_images_nchw_f32(nullptr, dims, pixels_dev, mean, std_dev, nchw_dev);
  cuda::normalize_images_nhwc_bf16(nullptr, dims, pixels_dev, mean, std_dev, nhwc_dev);
  DTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> nchw = to_host(nchw_dev, pixels.size());
  const std::vector<core::bfloat16> nhwc = to_host(nhwc_dev, pixels.size());
  size_t f32_wrong = 0, bf16_wrong = 0, off_exact = 0;
  const size_t plane = 13 * 17;
  for (size_t i = 0; i < pixels.size(); ++i) {
    f32_wrong += std::memcmp(&nchw[i], &host_nchw[i], sizeof(float)) != 0;
    bf16_wrong += nhwc[i].bits != core::to_bfloat16(host_nhwc[i]).bits;
    // float64: pixel i of the NHWC input is (image, p, c); its NCHW place is (image, c, p).
    const size_t c = i % 3, pixel = i / 3, image = pixel / plane, p = pixel % plane;
    const double exact = (pixels[i] / 255.0 - mean[c]) / std_dev[c];
    off_exact += !(std::fabs(nchw[(image * 3 + c) * plane + p] - exact) <= 1e-6 * (1 + std::fabs(exact)));
  }
  EXPECT_EQ(f32_wrong, 0u) << "fp32 NCHW elements differing from normalize_batch";
  EXPECT_EQ(bf16_wrong, 0u) << "bf16 NHWC elements that are not normalize_batch's value rounded";
  EXPECT_EQ(off_exact, 0u) << "fp32 elements off the float64 value";
  cudaFree(pixels_dev);
  cudaFree(nchw_dev);
  cudaFree(nhwc_dev);
}

#else
TEST(StepKernelsGpuTest, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::train
