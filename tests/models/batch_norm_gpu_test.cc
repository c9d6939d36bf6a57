// GPU batch norm (models/cuda/batch_norm) against the float64 CPU reference (models/cpu/batch_norm
// instantiated for double) on fresh random inputs: BN, BN + ReLU and BN + residual add + ReLU,
// forward (output, saved and running statistics), backward (dx, dgamma, dbeta, dresidual) and
// eval; fp32 NCHW within 1e-4 and bf16 NHWC within 2e-2, relative to |want| + the RMS of the output.
// And bf16 NHWC eval's 8-wide path against its one-element path, exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
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
#endif

namespace dtrain::models {
namespace {

#if DTRAIN_WITH_CUDA
using test::expect_close;

struct Case {
  int batch, channels, height, width;
  bool bf16_nhwc, relu, residual;
};

// The case's activations: bf16 NHWC or fp32 NCHW, filled from logical NCHW doubles.
class Activations : public test::DeviceActivations {
 public:
  Activations(const Case& c, std::vector<double>& values) : DeviceActivations(layout(c), values) {}
  static test::ActivationLayout layout(const Case& c) { return {c.batch, c.channels, c.height, c.width, c.bf16_nhwc}; }
};

// fp32 device vectors (parameters, statistics) from and back to the doubles the reference uses.
using Floats = test::DeviceVector<float>;
std::vector<float> floats(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}
std::vector<double> doubles(const Floats& device) {
  const std::vector<float> host = device.to_host();
  return {host.begin(), host.end()};
}

std::vector<double> random_values(size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

class BatchNormGpuTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
    DTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

template <typename T>
void run_case(const Case& c, cudaStream_t stream) {
  std::mt19937_64 rng(dtrain::test::random_seed());
  const size_t spatial = static_cast<size_t>(c.height) * c.width;
  const size_t n = static_cast<size_t>(c.batch) * c.channels * spatial;
  const double tolerance = c.bf16_nhwc ? 2e-2 : 1e-4;
  const std::string label =
      (c.bf16_nhwc ? "bf16 NHWC" : "fp32 NCHW") + std::string(c.relu ? " relu" : "") + (c.residual ? " +residual" : "");
  // Inputs off-centre (mean 3), as activations often are: a one-pass variance would lose digits.
  std::vector<double> x = random_values(n, 2.0, 4.0, rng), dy = random_values(n, -1.0, 1.0, rng);
  std::vector<double> residual = random_values(n, -1.0, 1.0, rng);
  const std::vector<double> gamma = random_values(c.channels, 0.5, 1.5, rng),
                            beta = random_values(c.channels, -0.5, 0.5, rng);
  std::vector<double> running_mean = random_values(c.channels, -0.1, 0.1, rng),
                      running_var = random_values(c.channels, 0.5, 1.5, rng);
  const Activations x_dev(c, x), dy_dev(c, dy), residual_dev(c, residual);
  std::vector<double> zeros(n, 0.0);
  Activations y_dev(c, zeros), dx_dev(c, zeros), dres_dev(c, zeros);
  Floats gamma_dev(floats(gamma)), beta_dev(floats(beta)), rmean_dev(floats(running_mean)),
      rvar_dev(floats(running_var));
  const size_t channels = static_cast<size_t>(c.channels);
  Floats saved_mean_dev(channels), saved_inv_std_dev(channels), dgamma_dev(channels), dbeta_dev(channels);

  // The ReLU mask, 1 bit per element, from forward to backward (checked below through dx and
  // dresidual against y's sign), followed by guard words that no kernel may write.
  const size_t mask_words = cuda::relu_mask_bytes(static_cast<int64_t>(n)) / sizeof(uint32_t), guard_words = 4;
  constexpr uint32_t kGuard = 0xa5a5a5a5u;
  std::vector<uint32_t> mask_host(mask_words + guard_words, 0);
  std::fill(mask_host.begin() + static_cast<long>(mask_words), mask_host.end(), kGuard);
  test::DeviceVector<uint32_t> relu_mask_dev(mask_host);
  uint8_t* relu_mask = c.relu ? reinterpret_cast<uint8_t*>(relu_mask_dev.get()) : nullptr;
  cuda::BatchNormDims dims{{c.batch, c.channels, static_cast<int64_t>(spatial), 1e-5, 0.1}, c.bf16_nhwc};
  cuda::batch_norm_forward_train<T>(
      stream, dims, x_dev.as<T>(), gamma_dev.get(), beta_dev.get(), c.residual ? residual_dev.as<T>() : nullptr, c.relu,
      y_dev.as<T>(), saved_mean_dev.get(), saved_inv_std_dev.get(), rmean_dev.get(), rvar_dev.get(), relu_mask);
  cuda::batch_norm_backward<T>(stream, dims, x_dev.as<T>(), relu_mask, dy_dev.as<T>(), gamma_dev.get(),
                               saved_mean_dev.get(), saved_inv_std_dev.get(), c.relu, dx_dev.as<T>(),
                               c.residual ? dres_dev.as<T>() : nullptr, dgamma_dev.get(), dbeta_dev.get());
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<uint32_t> mask_after = relu_mask_dev.to_host();
  for (size_t w = mask_words; w < mask_after.size(); ++w) {
    EXPECT_EQ(mask_after[w], kGuard) << "the ReLU mask's kernels wrote past its " << mask_words << " words (" << label
                                     << ")";
  }

  // Reference: the CPU kernels in double, then the residual and ReLU.
  cpu::BatchNormShape shape{c.batch, c.channels, static_cast<int64_t>(spatial), 1e-5, 0.1};
  std::vector<double> bn(n), mean(c.channels), inv_std(c.channels);
  std::vector<double> ref_rmean = running_mean, ref_rvar = running_var;
  cpu::batch_norm_forward_train<double>(shape, x.data(), gamma.data(), beta.data(), bn.data(), mean.data(),
                                        inv_std.data(), ref_rmean.data(), ref_rvar.data());
  std::vector<double> y = bn;
  for (size_t i = 0; i < n; ++i) {
    if (c.residual) y[i] += residual[i];
    if (c.relu) y[i] = std::max(y[i], 0.0);
  }
  const std::vector<double> y_got = y_dev.logical();
  expect_close(y_got, y, tolerance, "forward y " + label);
  expect_close(doubles(saved_mean_dev), mean, 1e-5, "saved mean " + label);
  expect_close(doubles(saved_inv_std_dev), inv_std, 1e-5, "saved inv std " + label);
  expect_close(doubles(rmean_dev), ref_rmean, 1e-5, "running mean " + label);
  expect_close(doubles(rvar_dev), ref_rvar, 1e-5, "running var " + label);

  // The ReLU mask is the device forward's, read from y's sign (it differs from the kernels' mask
  // only for values that round to 0 from above 0, which do not occur at these magnitudes).
  std::vector<double> dy_masked = dy;
  for (size_t i = 0; i < n; ++i) {
    if (c.relu && !(y_got[i] > 0)) dy_masked[i] = 0;
  }
  std::vector<double> dx(n), dgamma(c.channels), dbeta(c.channels);
  cpu::batch_norm_backward<double>(shape, x.data(), dy_masked.data(), gamma.data(), mean.data(), inv_std.data(),
                                   dx.data(), dgamma.data(), dbeta.data());
  expect_close(dx_dev.logical(), dx, tolerance, "backward dx " + label);
  expect_close(doubles(dgamma_dev), dgamma, tolerance, "backward dgamma " + label);
  expect_close(doubles(dbeta_dev), dbeta, tolerance, "backward dbeta " + label);
  if (c.residual) expect_close(dres_dev.logical(), dy_masked, tolerance, "backward dresidual " + label);

  // Eval with the (updated) running statistics.
  cuda::batch_norm_forward_eval<T>(stream, dims, x_dev.as<T>(), gamma_dev.get(), beta_dev.get(), rmean_dev.get(),
                                   rvar_dev.get(), c.residual ? residual_dev.as<T>() : nullptr, c.relu, y_dev.as<T>());
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> y_eval(n);
  cpu::batch_norm_forward_eval<double>(shape, x.data(), gamma.data(), beta.data(), ref_rmean.data(), ref_rvar.data(),
                                       y_eval.data());
  for (size_t i = 0; i < n; ++i) {
    if (c.residual) y_eval[i] += residual[i];
    if (c.relu) y_eval[i] = std::max(y_eval[i], 0.0);
  }
  expect_close(y_dev.logical(), y_eval, tolerance, "eval y " + label);
}

TEST_P(BatchNormGpuTest, MatchesFloat64Reference) {
  const Case& c = GetParam();
  if (c.bf16_nhwc) {
    run_case<runtime::bfloat16>(c, stream_);
  } else {
    run_case<float>(c, stream_);
  }
}

std::vector<Case> cases() {
  // Channel counts below, at and above a 32-channel block, odd spatial sizes, one large reduction;
  // multiples of 8 take bf16's vectorized path (264: 33 groups of 8, one past a full block). 104
  // channels (13 groups of 8) over 5.2 M elements: the element-wise kernels' one-wave grids loop
  // several times, rounded to a multiple of 13 blocks so that each thread keeps its channels; 264
  // (a period of 33 blocks, more than these small tensors fill) runs a grid of mostly idle threads
  // and a part-filled last iteration. fp32
  // NCHW takes the quad path where H*W is a multiple of 4; 3x5x4x4 ends in a part-filled mask word.
  // 32x45x27x27 (1 M elements, H*W odd, C not a multiple of 8) keeps the generic kernels of both
  // types on several row blocks and several passes of their one-wave loops (ResNet-50's 7x7 stage
  // runs them).
  const std::vector<Case> shapes = {{2, 3, 5, 7},      {4, 32, 6, 6},   {3, 45, 9, 11}, {8, 64, 28, 28},
                                    {1, 130, 3, 3},    {2, 264, 5, 5},  {3, 5, 4, 4},   {16, 256, 14, 14},
                                    {64, 104, 28, 28}, {32, 45, 27, 27}};
  std::vector<Case> all;
  for (const Case& s : shapes) {
    for (bool bf16 : {false, true}) {
      all.push_back({s.batch, s.channels, s.height, s.width, bf16, false, false});
      all.push_back({s.batch, s.channels, s.height, s.width, bf16, true, false});
      all.push_back({s.batch, s.channels, s.height, s.width, bf16, true, true});
    }
  }
  return all;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::ostringstream name;
  name << "n" << c.batch << "c" << c.channels << "h" << c.height << "w" << c.width
       << (c.bf16_nhwc ? "_bf16_nhwc" : "_fp32_nchw") << (c.relu ? "_relu" : "") << (c.residual ? "_add" : "");
  return name.str();
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormGpuTest, testing::ValuesIn(cases()), case_name);

// The bf16 NHWC normalization's 8-wide path (several vectors a thread per loop iteration, one
// channel group a thread, a grid rounded to the channels' period) against the one-element path on
// the same inputs, exactly: both compute fmaf(x, scale, shift) [+ residual] [then the ReLU] per
// element with the same scale and shift (eval: from the running statistics, not from reductions
// that differ between the paths), so the values agree bit for bit (up to the sign of a zero: the
// one-element path adds no residual where there is none). Every activation one element past a
// 16-byte boundary takes the one-element path.
class BatchNormVectorPathTest : public BatchNormGpuTest {};

TEST_P(BatchNormVectorPathTest, EvalEqualsOneElementPath) {
  const Case& c = GetParam();
  std::mt19937_64 rng(dtrain::test::random_seed());
  const size_t n = static_cast<size_t>(c.batch) * c.channels * c.height * c.width;
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  // Host images of the device buffers: the values at 0 (aligned) and at 1 (one element off).
  std::vector<runtime::bfloat16> x_at0(n + 1), x_at1(n + 1), r_at0(n + 1), r_at1(n + 1);
  for (size_t i = 0; i < n; ++i) {
    x_at0[i] = x_at1[i + 1] = runtime::to_bfloat16(u(rng));
    r_at0[i] = r_at1[i + 1] = runtime::to_bfloat16(u(rng));
  }
  const test::DeviceVector<runtime::bfloat16> x0(x_at0), x1(x_at1), r0(r_at0), r1(r_at1);
  test::DeviceVector<runtime::bfloat16> y0(n + 1), y1(n + 1);
  const std::vector<double> gamma = random_values(c.channels, 0.5, 1.5, rng),
                            beta = random_values(c.channels, -0.5, 0.5, rng),
                            mean = random_values(c.channels, -0.5, 0.5, rng),
                            var = random_values(c.channels, 0.5, 1.5, rng);
  const Floats gamma_dev(floats(gamma)), beta_dev(floats(beta)), mean_dev(floats(mean)), var_dev(floats(var));
  const cuda::BatchNormDims dims{{c.batch, c.channels, static_cast<int64_t>(c.height) * c.width, 1e-5, 0.1}, true};
  for (const int at : {0, 1}) {
    const runtime::bfloat16* x = (at == 0 ? x0.get() : x1.get() + 1);
    const runtime::bfloat16* residual = c.residual ? (at == 0 ? r0.get() : r1.get() + 1) : nullptr;
    cuda::batch_norm_forward_eval<runtime::bfloat16>(stream_, dims, x, gamma_dev.get(), beta_dev.get(), mean_dev.get(),
                                                     var_dev.get(), residual, c.relu,
                                                     at == 0 ? y0.get() : y1.get() + 1);
  }
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const std::vector<runtime::bfloat16> vectors = y0.to_host(), elements = y1.to_host();
  size_t differ = 0, first = n;
  for (size_t i = 0; i < n; ++i) {
    if (runtime::to_float(vectors[i]) == runtime::to_float(elements[i + 1])) continue;
    if (differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << "8-wide and one-element eval outputs differ at " << differ << " of " << n
                        << " elements, first at element " << first;
}

// Channel counts of period 1 (32, 256), 13 (104: its grids loop several times) and 33 (264: past
// these tensors' one-wave grids), and counts of vectors that leave a part-filled last iteration.
std::vector<Case> vector_path_cases() {
  const std::vector<Case> shapes = {{4, 32, 6, 6}, {2, 264, 5, 5}, {16, 256, 14, 14}, {64, 104, 28, 28}, {3, 8, 7, 5}};
  std::vector<Case> all;
  for (const Case& s : shapes) {
    for (const bool relu : {false, true}) {
      for (const bool residual : {false, true})
        all.push_back({s.batch, s.channels, s.height, s.width, true, relu, residual});
    }
  }
  return all;
}
INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormVectorPathTest, testing::ValuesIn(vector_path_cases()), case_name);

#else
TEST(BatchNormGpuTest, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::models
