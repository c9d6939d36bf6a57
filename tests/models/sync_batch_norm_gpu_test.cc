// Synchronized batch norm on the GPU (models/cuda/batch_norm with a BatchStatsReducer): the ranks
// of a group are threads of this process, each with its own stream on GPU 0 and its slice of the
// group's batch (uneven slices), exchanging through tests/support/thread_group_reducer.h. Every
// rank's output, saved and running statistics, dx and dresidual, and the group's summed dgamma and
// dbeta, must match the float64 CPU reference (models/cpu/batch_norm for double) on the group's
// whole batch; fp32 NCHW and bf16 NHWC (its vectorized path included), BN + ReLU + residual.
// Tolerances as in batch_norm_gpu_test.cc: 1e-4 (fp32) and 2e-2 (bf16) relative to |want| + RMS.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "models/cpu/batch_norm.h"
#include "runtime/memory/dtype.h"
#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "models/cuda/batch_norm.h"
#include "runtime/cuda/cuda_check.h"
#include "tests/support/device_activations.h"
#include "tests/support/device_vector.h"
#include "tests/support/expect_close.h"
#include "tests/support/test_seed.h"
#include "tests/support/thread_group_reducer.h"
#endif

namespace dtrain::models {
namespace {

#if DTRAIN_WITH_CUDA
using test::expect_close;
using Floats = test::DeviceVector<float>;

struct SyncCase {
  std::vector<int> batches;  // per rank of the group
  int channels, height, width;
  bool bf16_nhwc;
};

std::vector<double> random_values(size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

std::vector<double> doubles(const Floats& device) {
  const std::vector<float> host = device.to_host();
  return {host.begin(), host.end()};
}

// One rank: its slice of the activations on the device and its own parameters and statistics.
struct Rank {
  test::ActivationLayout layout;
  size_t first = 0;  // its first logical element in the whole batch
  std::unique_ptr<test::DeviceActivations> x, dy, residual, y, dx, dresidual;
  std::unique_ptr<Floats> gamma, beta, running_mean, running_var, saved_mean, saved_inv_std, dgamma, dbeta;
  std::unique_ptr<test::DeviceVector<uint32_t>> relu_mask;  // cuda::relu_mask_bytes of the slice
};

// A slice [first, first + count) of `whole` on the device, rounded to the storage type, and the
// rounded values written back into `whole` (so the reference sees what the GPU sees).
std::unique_ptr<test::DeviceActivations> slice_on_device(const test::ActivationLayout& layout,
                                                         std::vector<double>& whole, size_t first) {
  std::vector<double> part(whole.begin() + static_cast<long>(first),
                           whole.begin() + static_cast<long>(first + layout.size()));
  auto device = std::make_unique<test::DeviceActivations>(layout, part);
  std::copy(part.begin(), part.end(), whole.begin() + static_cast<long>(first));
  return device;
}

template <typename T>
void run_sync_case(const SyncCase& c) {
  std::mt19937_64 rng(test::random_seed());
  const int ranks = static_cast<int>(c.batches.size());
  int total = 0;
  for (int b : c.batches) total += b;
  const size_t spatial = size_t(c.height) * c.width, channels = size_t(c.channels);
  const size_t n = size_t(total) * channels * spatial;
  const double tolerance = c.bf16_nhwc ? 2e-2 : 1e-4;
  const std::string label = std::string(c.bf16_nhwc ? "bf16 NHWC" : "fp32 NCHW") + " over " + std::to_string(ranks) +
                            " ranks, C=" + std::to_string(c.channels);
  std::vector<double> x = random_values(n, 2.0, 4.0, rng), dy = random_values(n, -1.0, 1.0, rng);
  std::vector<double> residual = random_values(n, -1.0, 1.0, rng);
  const std::vector<double> gamma = random_values(channels, 0.5, 1.5, rng),
                            beta = random_values(channels, -0.5, 0.5, rng);
  const std::vector<double> running_mean = random_values(channels, -0.1, 0.1, rng),
                            running_var = random_values(channels, 0.5, 1.5, rng);
  auto floats = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };

  std::vector<Rank> group(static_cast<size_t>(ranks));
  size_t first = 0;
  for (int r = 0; r < ranks; ++r) {
    Rank& k = group[size_t(r)];
    k.layout = {c.batches[size_t(r)], c.channels, c.height, c.width, c.bf16_nhwc};
    k.first = first;
    k.x = slice_on_device(k.layout, x, first);
    k.dy = slice_on_device(k.layout, dy, first);
    k.residual = slice_on_device(k.layout, residual, first);
    k.y = std::make_unique<test::DeviceActivations>(k.layout);
    k.dx = std::make_unique<test::DeviceActivations>(k.layout);
    k.dresidual = std::make_unique<test::DeviceActivations>(k.layout);
    k.gamma = std::make_unique<Floats>(floats(gamma));
    k.beta = std::make_unique<Floats>(floats(beta));
    k.running_mean = std::make_unique<Floats>(floats(running_mean));
    k.running_var = std::make_unique<Floats>(floats(running_var));
    for (auto* v : {&k.saved_mean, &k.saved_inv_std, &k.dgamma, &k.dbeta}) *v = std::make_unique<Floats>(channels);
    k.relu_mask = std::make_unique<test::DeviceVector<uint32_t>>(
        cuda::relu_mask_bytes(static_cast<int64_t>(k.layout.size())) / sizeof(uint32_t));
    first += k.layout.size();
  }

  // Each rank on a thread and stream of its own: forward, then backward, in sync with the others.
  test::ThreadGroup threads(ranks);
  std::vector<std::unique_ptr<test::ThreadGroup::Member>> members;
  for (int r = 0; r < ranks; ++r) members.push_back(std::make_unique<test::ThreadGroup::Member>(threads, r));
  std::vector<std::thread> running;
  for (int r = 0; r < ranks; ++r) {
    running.emplace_back([&, r] {
      Rank& k = group[size_t(r)];
      DTRAIN_CUDA_CHECK(cudaSetDevice(0));
      cudaStream_t stream = nullptr;
      DTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      const cuda::BatchNormDims dims{{k.layout.n, c.channels, static_cast<int64_t>(spatial), 1e-5, 0.1}, c.bf16_nhwc};
      cuda::batch_norm_forward_train<T>(stream, dims, k.x->as<T>(), k.gamma->get(), k.beta->get(), k.residual->as<T>(),
                                        true, k.y->as<T>(), k.saved_mean->get(), k.saved_inv_std->get(),
                                        k.running_mean->get(), k.running_var->get(),
                                        reinterpret_cast<uint8_t*>(k.relu_mask->get()), members[size_t(r)].get());
      cuda::batch_norm_backward<T>(stream, dims, k.x->as<T>(), reinterpret_cast<const uint8_t*>(k.relu_mask->get()),
                                   k.dy->as<T>(), k.gamma->get(), k.saved_mean->get(), k.saved_inv_std->get(), true,
                                   k.dx->as<T>(), k.dresidual->as<T>(), k.dgamma->get(), k.dbeta->get(),
                                   members[size_t(r)].get());
      DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
      DTRAIN_CUDA_CHECK(cudaStreamDestroy(stream));
    });
  }
  for (std::thread& t : running) t.join();

  // The reference: the group's whole batch in double, then the residual and the ReLU.
  const cpu::BatchNormShape shape{total, c.channels, static_cast<int64_t>(spatial), 1e-5, 0.1};
  std::vector<double> bn(n), mean(channels), inv_std(channels), ref_rmean = running_mean, ref_rvar = running_var;
  cpu::batch_norm_forward_train<double>(shape, x.data(), gamma.data(), beta.data(), bn.data(), mean.data(),
                                        inv_std.data(), ref_rmean.data(), ref_rvar.data());
  std::vector<double> y_got(n);
  for (const Rank& k : group) {
    const std::vector<double> part = k.y->logical();
    std::copy(part.begin(), part.end(), y_got.begin() + static_cast<long>(k.first));
  }
  std::vector<double> y(n), dy_masked = dy;
  for (size_t i = 0; i < n; ++i) {
    y[i] = std::max(bn[i] + residual[i], 0.0);
    if (!(y_got[i] > 0)) dy_masked[i] = 0;  // the device forward's ReLU mask
  }
  std::vector<double> dx(n), dgamma(channels), dbeta(channels);
  cpu::batch_norm_backward<double>(shape, x.data(), dy_masked.data(), gamma.data(), mean.data(), inv_std.data(),
                                   dx.data(), dgamma.data(), dbeta.data());
  expect_close(y_got, y, tolerance, "forward y " + label);
  std::vector<double> dgamma_sum(channels, 0.0), dbeta_sum(channels, 0.0);
  for (int r = 0; r < ranks; ++r) {
    const Rank& k = group[size_t(r)];
    const std::string who = label + ", rank " + std::to_string(r);
    EXPECT_EQ(members[size_t(r)]->calls, 2) << who << ": one exchange in forward, one in backward";
    expect_close(doubles(*k.saved_mean), mean, 1e-5, "saved mean " + who);
    expect_close(doubles(*k.saved_inv_std), inv_std, 1e-5, "saved inv std " + who);
    expect_close(doubles(*k.running_mean), ref_rmean, 1e-5, "running mean " + who);
    expect_close(doubles(*k.running_var), ref_rvar, 1e-5, "running var " + who);
    const auto begin = static_cast<long>(k.first), end = static_cast<long>(k.first + k.layout.size());
    expect_close(k.dx->logical(), std::vector<double>(dx.begin() + begin, dx.begin() + end), tolerance, "dx " + who);
    expect_close(k.dresidual->logical(), std::vector<double>(dy_masked.begin() + begin, dy_masked.begin() + end),
                 tolerance, "dresidual " + who);
    const std::vector<double> g = doubles(*k.dgamma), b = doubles(*k.dbeta);
    for (size_t i = 0; i < channels; ++i) dgamma_sum[i] += g[i], dbeta_sum[i] += b[i];
  }
  expect_close(dgamma_sum, dgamma, tolerance, "dgamma summed over the group " + label);
  expect_close(dbeta_sum, dbeta, tolerance, "dbeta summed over the group " + label);
}

class SyncBatchNormGpuTest : public testing::TestWithParam<SyncCase> {
 protected:
  void SetUp() override {
    if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  }
};

TEST_P(SyncBatchNormGpuTest, GroupMatchesFloat64ReferenceOnTheGroupsBatch) {
  const SyncCase& c = GetParam();
  if (c.bf16_nhwc) {
    run_sync_case<runtime::bfloat16>(c);
  } else {
    run_sync_case<float>(c);
  }
}

std::vector<SyncCase> sync_cases() {
  // Uneven slices; a channel count past a 32-channel block; multiples of 8 take bf16's vector path.
  std::vector<SyncCase> all;
  for (bool bf16 : {false, true}) {
    all.push_back({{2, 3}, 5, 4, 6, bf16});
    all.push_back({{1, 4, 2}, 40, 5, 5, bf16});
    all.push_back({{4, 4}, 64, 8, 8, bf16});
  }
  return all;
}

std::string sync_case_name(const testing::TestParamInfo<SyncCase>& info) {
  const SyncCase& c = info.param;
  std::ostringstream name;
  name << "ranks";
  for (int b : c.batches) name << "_" << b;
  name << "_c" << c.channels << "h" << c.height << "w" << c.width << (c.bf16_nhwc ? "_bf16_nhwc" : "_fp32_nchw");
  return name.str();
}

INSTANTIATE_TEST_SUITE_P(Groups, SyncBatchNormGpuTest, testing::ValuesIn(sync_cases()), sync_case_name);

#else
TEST(SyncBatchNormGpuTest, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::models
