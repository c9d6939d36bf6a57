// What a GPU step hands to checkpoints is in the standard layout, whatever its
// numerics. The bf16 NHWC path keeps 4-D filters as [K, R, S, C] on the device; at c96be46 the
// parameters were converted on the way out and the momentum was not, so a bf16 checkpoint resumed
// in fp32 or on the CPU scrambled the momentum of every k x k filter.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "tests/support/test_seed.h"
#include "train/engine/cuda/gpu_train_step.h"
#endif

namespace dtrain::train {
namespace {

#if DTRAIN_WITH_CUDA
// A small ResNet on each numerics: momentum loaded from the host equal to the parameters must sit
// on the device exactly where the parameters sit (the update pairs them element by element), and
// come back to the host unchanged.
TEST(CheckpointLayoutGpu, MomentumTakesTheParametersLayoutOnTheDeviceAndTheStandardOneOnTheHost) {
  if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
  DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  const uint64_t seed = test::random_seed();
  for (auto numerics : {models::cuda::ConvNumerics::kBf16Nhwc, models::cuda::ConvNumerics::kFp32Nchw}) {
    cuda::GpuStepOptions o;
    o.model.depth = 18;
    o.model.num_classes = 10;
    o.numerics = numerics;
    o.batch = 2;
    o.height = o.width = 32;
    cuda::GpuTrainStep step(o, nullptr, 0);
    models::ParameterSet& host = step.model().parameters();
    const size_t n = static_cast<size_t>(host.flat_size());
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (size_t i = 0; i < n; ++i) host.params_flat()[i] = dist(rng);
    const std::vector<float> standard(host.params_flat(), host.params_flat() + n);
    step.load_from_host(standard);
    std::vector<float> params_on_device(n), momentum_on_device(n);
    DTRAIN_CUDA_CHECK(cudaMemcpy(params_on_device.data(), step.model().device_parameters().params_f32(), n * 4,
                                 cudaMemcpyDeviceToHost));
    DTRAIN_CUDA_CHECK(cudaMemcpy(momentum_on_device.data(), step.momentum_on_device(), n * 4, cudaMemcpyDeviceToHost));
    size_t apart = 0;
    for (size_t i = 0; i < n; ++i) apart += params_on_device[i] != momentum_on_device[i];
    const char* name = numerics == models::cuda::ConvNumerics::kBf16Nhwc ? "bf16 NHWC" : "fp32 NCHW";
    EXPECT_EQ(apart, 0u) << name << ": momentum and parameters laid out differently on the device (seed " << seed
                         << ")";
    std::vector<float> back;
    step.momentum_to_host(back);
    EXPECT_EQ(back, standard) << name << ": the momentum did not come back in the standard layout (seed " << seed
                              << ")";
  }
}
#else
TEST(CheckpointLayoutGpu, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::train
