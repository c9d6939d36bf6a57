// cuDNN convolution (models/cuda/cudnn_conv2d) against a float64 CPU reference on fresh random
// inputs: forward, backward data and backward filter, fp32 NCHW with TF32 off (1e-4) and on, and
// bf16 NHWC (2e-2). Errors are relative to the sum of |terms| of each output, the scale its
// rounding error lives on. Registered everywhere; skips, saying why, without CUDA or a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "runtime/memory/dtype.h"
#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "models/cuda/conv_plan_cache.h"
#include "models/cuda/cudnn_conv2d.h"
#include "runtime/cuda/cuda_check.h"
#include "tests/support/device_vector.h"
#include "tests/support/test_seed.h"
#endif

namespace dtrain::models {
namespace {

#if DTRAIN_WITH_CUDA
using cuda::ConvNumerics;

struct Case {
  Conv2dShape geometry;
  ConvNumerics numerics;
  bool allow_tf32;
  double tolerance;
};

// Logical (n, c, h, w) -> storage index in NCHW or NHWC; filters (k, c, r, s) -> KCRS or KRSC.
size_t at(bool nhwc, int n, int c, int h, int w, int C, int H, int W) {
  return nhwc ? ((static_cast<size_t>(n) * H + h) * W + w) * C + c : ((static_cast<size_t>(n) * C + c) * H + h) * W + w;
}

struct Reference {
  std::vector<double> y, dx, dw;              // exact results, storage order of the layout
  std::vector<double> y_mag, dx_mag, dw_mag;  // sum of |terms| per output
};

Reference reference(const Conv2dShape& g, bool nhwc, const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& dy) {
  const int OH = g.out_h(), OW = g.out_w();
  Reference r;
  r.y.assign(dy.size(), 0.0);
  r.y_mag.assign(dy.size(), 0.0);
  r.dx.assign(x.size(), 0.0);
  r.dx_mag.assign(x.size(), 0.0);
  r.dw.assign(w.size(), 0.0);
  r.dw_mag.assign(w.size(), 0.0);
  for (int n = 0; n < g.batch; ++n)
    for (int k = 0; k < g.out_channels; ++k)
      for (int oh = 0; oh < OH; ++oh)
        for (int ow = 0; ow < OW; ++ow) {
          const size_t yi = at(nhwc, n, k, oh, ow, g.out_channels, OH, OW);
          for (int c = 0; c < g.in_channels; ++c)
            for (int i = 0; i < g.kernel_h; ++i)
              for (int j = 0; j < g.kernel_w; ++j) {
                const int ih = oh * g.stride_h - g.pad_h + i, iw = ow * g.stride_w - g.pad_w + j;
                if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
                const size_t xi = at(nhwc, n, c, ih, iw, g.in_channels, g.in_h, g.in_w);
                const size_t wi = at(nhwc, k, c, i, j, g.in_channels, g.kernel_h, g.kernel_w);
                r.y[yi] += x[xi] * w[wi];
                r.y_mag[yi] += std::fabs(x[xi] * w[wi]);
                r.dx[xi] += dy[yi] * w[wi];
                r.dx_mag[xi] += std::fabs(dy[yi] * w[wi]);
                r.dw[wi] += dy[yi] * x[xi];
                r.dw_mag[wi] += std::fabs(dy[yi] * x[xi]);
              }
        }
  return r;
}

// Host values in the case's storage type: fp32, or bf16 (then the reference uses the rounded value).
struct HostTensor {
  std::vector<double> values;
  std::vector<unsigned char> bytes;
};

HostTensor random_tensor(size_t count, bool bf16, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  HostTensor t;
  t.values.resize(count);
  t.bytes.resize(count * (bf16 ? 2 : 4));
  for (size_t i = 0; i < count; ++i) {
    float v = uniform(rng);
    if (bf16) {
      const runtime::bfloat16 b = runtime::to_bfloat16(v);
      std::memcpy(&t.bytes[2 * i], &b, 2);
      v = runtime::to_float(b);
    } else {
      std::memcpy(&t.bytes[4 * i], &v, 4);
    }
    t.values[i] = v;
  }
  return t;
}

double element(const std::vector<unsigned char>& bytes, size_t i, bool bf16) {
  if (bf16) {
    runtime::bfloat16 b;
    std::memcpy(&b, &bytes[2 * i], 2);
    return runtime::to_float(b);
  }
  float f;
  std::memcpy(&f, &bytes[4 * i], 4);
  return f;
}

using DeviceBytes = test::DeviceVector<unsigned char>;

void expect_close(const std::vector<unsigned char>& got, const std::vector<double>& want,
                  const std::vector<double>& magnitude, bool bf16, double tolerance, const std::string& what) {
  size_t wrong = 0, first = 0;
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double error = std::fabs(element(got, i, bf16) - want[i]) / std::max(magnitude[i], 1e-30);
    worst = std::max(worst, magnitude[i] > 0 ? error : 0.0);
    if (magnitude[i] > 0 && !(error <= tolerance) && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0u) << what << ": " << wrong << " of " << want.size() << " elements off; first " << first << ": got "
                       << element(got, first, bf16) << ", want " << want[first] << " (|terms| " << magnitude[first]
                       << ")";
  std::printf("  %-70s worst error %.2e (bound %.0e)\n", what.c_str(), worst, tolerance);
}

class CudnnConv2dTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
    DTRAIN_CUDNN_CHECK(cudnnCreate(&handle_));
    DTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DTRAIN_CUDNN_CHECK(cudnnSetStream(handle_, stream_));
  }
  void TearDown() override {
    if (handle_ != nullptr) cudnnDestroy(handle_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudnnHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

TEST_P(CudnnConv2dTest, ForwardAndBackwardMatchFloat64Reference) {
  const Case& c = GetParam();
  const Conv2dShape& g = c.geometry;
  const bool bf16 = c.numerics == ConvNumerics::kBf16Nhwc;
  std::mt19937_64 rng(dtrain::test::random_seed());
  const size_t x_count = static_cast<size_t>(g.input_size());
  const size_t w_count = static_cast<size_t>(g.filter_size());
  const size_t y_count = static_cast<size_t>(g.output_size());
  const HostTensor x = random_tensor(x_count, bf16, rng), w = random_tensor(w_count, bf16, rng),
                   dy = random_tensor(y_count, bf16, rng);
  const Reference want = reference(g, bf16, x.values, w.values, dy.values);

  DeviceBytes dx_dev(x.bytes), x_dev(x.bytes), w_dev(w.bytes), dw_dev(w.bytes), dy_dev(dy.bytes), y_dev(dy.bytes);
  cuda::CudnnConv2d conv(handle_, g, c.numerics, c.allow_tf32);
  for (int step = 0; step < 2; ++step) {  // the second step runs on the cached algorithms
    conv.forward(x_dev.get(), w_dev.get(), y_dev.get());
    conv.backward_data(dy_dev.get(), w_dev.get(), dx_dev.get());
    conv.backward_filter(x_dev.get(), dy_dev.get(), dw_dev.get());
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const std::string label = g.describe() +
                              (bf16           ? " bf16 NHWC"
                               : c.allow_tf32 ? " fp32 TF32"
                                              : " fp32") +
                              " step " + std::to_string(step);
    expect_close(y_dev.to_host(), want.y, want.y_mag, bf16, c.tolerance, "forward " + label);
    expect_close(dx_dev.to_host(), want.dx, want.dx_mag, bf16, c.tolerance, "backward data " + label);
    expect_close(dw_dev.to_host(), want.dw, want.dw_mag, bf16, c.tolerance, "backward filter " + label);
  }
}

TEST_P(CudnnConv2dTest, ASecondLayerOfTheSameShapeReusesTheMeasuredAlgorithms) {
  const Case& c = GetParam();
  const Conv2dShape& g = c.geometry;
  const bool bf16 = c.numerics == ConvNumerics::kBf16Nhwc;
  std::mt19937_64 rng(dtrain::test::random_seed());
  const HostTensor x = random_tensor(static_cast<size_t>(g.input_size()), bf16, rng);
  const HostTensor w = random_tensor(static_cast<size_t>(g.filter_size()), bf16, rng);
  const HostTensor y = random_tensor(static_cast<size_t>(g.output_size()), bf16, rng);
  DeviceBytes x_dev(x.bytes), w_dev(w.bytes), y_dev(y.bytes);
  cuda::CudnnConv2d first(handle_, g, c.numerics, c.allow_tf32);
  first.forward(x_dev.get(), w_dev.get(), y_dev.get());
  const size_t measured = cuda::CudnnConv2d::measurements_made();
  cuda::CudnnConv2d second(handle_, g, c.numerics, c.allow_tf32);
  second.forward(x_dev.get(), w_dev.get(), y_dev.get());
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(cuda::CudnnConv2d::measurements_made(), measured);
}

// A later process rebuilds the measured plans from the plan file instead of measuring, and gets
// the same engines, so the same bits; a stale entry (an engine this cuDNN does not have) is
// measured again and replaced; with the cache off no file is named.
TEST(ConvPlanCache, ALaterProcessRebuildsThePlansFromTheFileWithTheSameResults) {
  if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
  DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  namespace fs = std::filesystem;
  const fs::path folder = fs::temp_directory_path() / ("dtrain_plan_cache_" + std::to_string(::getpid()));
  fs::remove_all(folder);
  // Whatever happens below, later tests get the environment's cache and no leftover folder.
  struct Restore {
    fs::path folder;
    ~Restore() {
      cuda::reset_conv_plan_cache(std::nullopt);
      std::error_code ignored;
      fs::remove_all(folder, ignored);
    }
  } restore{folder};
  cudnnHandle_t handle = nullptr;
  DTRAIN_CUDNN_CHECK(cudnnCreate(&handle));
  std::mt19937_64 rng(dtrain::test::random_seed());
  const Conv2dShape g{4, 32, 14, 14, 48, 3, 3, 1, 1, 1, 1};
  const HostTensor x = random_tensor(static_cast<size_t>(g.input_size()), true, rng);
  const HostTensor w = random_tensor(static_cast<size_t>(g.filter_size()), true, rng);
  const HostTensor dy = random_tensor(static_cast<size_t>(g.output_size()), true, rng);
  DeviceBytes x_dev(x.bytes), w_dev(w.bytes), dy_dev(dy.bytes), y_dev(dy.bytes), dx_dev(x.bytes), dw_dev(w.bytes);
  // One "process": the three passes of a fresh layer; their outputs and how the plans came.
  struct Run {
    std::vector<unsigned char> y, dx, dw;
    size_t measured = 0, loaded = 0;
  };
  auto run = [&](const std::optional<std::string>& cache) {
    cuda::reset_conv_plan_cache(cache);
    const size_t measured = cuda::conv_plans_measured(), loaded = cuda::conv_plans_loaded();
    cuda::CudnnConv2d conv(handle, g, ConvNumerics::kBf16Nhwc, false);
    conv.forward(x_dev.get(), w_dev.get(), y_dev.get());
    conv.backward_data(dy_dev.get(), w_dev.get(), dx_dev.get());
    conv.backward_filter(x_dev.get(), dy_dev.get(), dw_dev.get());
    DTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
    return Run{y_dev.to_host(), dx_dev.to_host(), dw_dev.to_host(), cuda::conv_plans_measured() - measured,
               cuda::conv_plans_loaded() - loaded};
  };
  const Run first = run(folder.string());
  EXPECT_EQ(first.measured, 3u);
  EXPECT_EQ(first.loaded, 0u);
  const std::string file = cuda::conv_plan_file_path();
  ASSERT_TRUE(fs::exists(file)) << file;
  std::vector<std::string> lines;
  {
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), 4u) << "a header and three plans in " << file;

  const Run second = run(folder.string());
  EXPECT_EQ(second.measured, 0u);
  EXPECT_EQ(second.loaded, 3u);
  EXPECT_TRUE(second.y == first.y && second.dx == first.dx && second.dw == first.dw)
      << "the rebuilt plans gave other results than the measured ones";

  {
    std::ofstream out(file, std::ios::trunc);
    out << lines[0] << "\n";
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t engine = lines[i].find(" engine="), end = lines[i].find(' ', engine + 1);
      out << lines[i].substr(0, engine) << " engine=99999" << lines[i].substr(end) << "\n";
    }
  }
  const Run stale = run(folder.string());
  EXPECT_EQ(stale.measured, 3u);
  EXPECT_EQ(stale.loaded, 0u);
  {
    std::ifstream in(file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("engine=99999"), std::string::npos) << "the stale entries were not replaced:\n" << text;
  }

  const Run off = run(std::string());
  EXPECT_EQ(off.measured, 3u);
  EXPECT_EQ(cuda::conv_plan_file_path(), "");
  cudnnDestroy(handle);
}

// ResNet-50's kinds of convolution, small: the 7x7/2 stem, 3x3 with and without stride, 1x1
// projections with stride, odd spatial sizes, channel counts that are not multiples of 8.
std::vector<Case> cases() {
  // {batch, C, H, W, K, kernel R, S, stride, stride, pad, pad}. The last two differ per axis, so a
  // height/width mix-up in the cuDNN descriptors cannot pass.
  const std::vector<Conv2dShape> shapes = {
      {2, 3, 17, 19, 8, 7, 7, 2, 2, 3, 3},  {2, 16, 9, 9, 32, 3, 3, 1, 1, 1, 1}, {3, 32, 8, 8, 16, 1, 1, 1, 1, 0, 0},
      {2, 8, 10, 10, 16, 3, 3, 2, 2, 1, 1}, {2, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1}, {2, 24, 11, 11, 40, 1, 1, 2, 2, 0, 0},
      {1, 5, 6, 7, 3, 3, 3, 1, 1, 1, 1},    {2, 6, 9, 13, 8, 1, 3, 2, 1, 0, 1},  {1, 4, 12, 7, 5, 5, 3, 1, 2, 2, 0}};
  std::vector<Case> all;
  for (const Conv2dShape& g : shapes) {
    all.push_back({g, ConvNumerics::kFp32Nchw, false, 1e-4});
    all.push_back({g, ConvNumerics::kFp32Nchw, true, 5e-3});  // TF32: 10-bit mantissa products
    all.push_back({g, ConvNumerics::kBf16Nhwc, false, 2e-2});
  }
  return all;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  const Conv2dShape& g = c.geometry;
  std::ostringstream name;
  name << "n" << g.batch << "c" << g.in_channels << "h" << g.in_h << "w" << g.in_w << "k" << g.out_channels << "r"
       << g.kernel_h << "s" << g.kernel_w << "u" << g.stride_h << "v" << g.stride_w << "p" << g.pad_h << "q" << g.pad_w
       << (c.numerics == ConvNumerics::kBf16Nhwc ? "_bf16_nhwc"
           : c.allow_tf32                        ? "_fp32_tf32"
                                                 : "_fp32");
  return name.str();
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudnnConv2dTest, testing::ValuesIn(cases()), case_name);

#else
TEST(CudnnConv2dTest, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::models
