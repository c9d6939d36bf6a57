// The GPU pooling, linear and activation kernels against the float64 CPU reference on fresh random
// inputs: fp32 NCHW (TF32 off) within 1e-4 and bf16 NHWC within 2e-2, relative to |want| + RMS.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "models/cpu/conv2d.h"
#include "models/cpu/elementwise.h"
#include "models/cpu/linear.h"
#include "models/cpu/pooling.h"
#include "runtime/memory/dtype.h"
#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "models/cuda/device_parameters.h"
#include "models/cuda/elementwise.h"
#include "models/cuda/gpu_context.h"
#include "models/cuda/gpu_layers.h"
#include "models/cuda/linear.h"
#include "models/cuda/pooling.h"
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

using Layout = test::ActivationLayout;
using DeviceArray = test::DeviceActivations;

std::vector<double> random_values(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

double tolerance(bool bf16) {
  return bf16 ? 2e-2 : 1e-4;
}

class GpuLayersTest : public testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
    DTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  bool bf16() const { return GetParam(); }
  std::string name(const std::string& what) const { return what + (bf16() ? " bf16 NHWC" : " fp32 NCHW"); }
  std::mt19937_64 rng_{dtrain::test::random_seed()};
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
};

template <typename T, typename Fn>
void typed(bool bf16, Fn&& fn) {
  if (bf16) {
    fn(runtime::bfloat16{});
  } else {
    fn(float{});
  }
}

TEST_P(GpuLayersTest, MaxPoolMatchesReference) {
  // The ImageNet stem's 3x3/2 pad 1 pool and an odd-sized one with a 2x2/2 window; with channels
  // a multiple of 8 too, which bf16 NHWC runs through the 8-channel kernels.
  for (const cpu::PoolShape s : {cpu::PoolShape{3, 5, 13, 11, 3, 2, 1}, cpu::PoolShape{2, 3, 9, 7, 2, 2, 0},
                                 cpu::PoolShape{3, 16, 13, 11, 3, 2, 1}, cpu::PoolShape{2, 24, 9, 7, 2, 2, 0}}) {
    const Layout in{s.batch, s.channels, s.in_h, s.in_w, bf16()},
        out{s.batch, s.channels, s.out_h(), s.out_w(), bf16()};
    std::vector<double> x = random_values(in.size(), rng_), dy = random_values(out.size(), rng_);
    const DeviceArray x_d(in, x), dy_d(out, dy), y_d(out), dx_d(in);
    test::DeviceVector<int32_t> argmax(out.size());
    typed<void>(bf16(), [&](auto tag) {
      using T = decltype(tag);
      cuda::max_pool_forward(stream_, s, bf16(), x_d.as<T>(), y_d.as<T>(), argmax.get());
      cuda::max_pool_backward(stream_, s, bf16(), dy_d.as<T>(), argmax.get(), dx_d.as<T>());
    });
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<double> y(out.size()), dx(in.size());
    std::vector<int32_t> want_argmax(out.size());
    cpu::max_pool_forward(s, x.data(), y.data(), want_argmax.data());
    cpu::max_pool_backward(s, dy.data(), want_argmax.data(), dx.data());
    expect_close(y_d.logical(), y, 0.0, name("max pool forward"));
    expect_close(dx_d.logical(), dx, tolerance(bf16()), name("max pool backward"));
  }
}

TEST_P(GpuLayersTest, GlobalAvgPoolMatchesReference) {
  const int n = 3, c = 37, h = 7, w = 5;
  const Layout in{n, c, h, w, bf16()}, out{n, c, 1, 1, bf16()};
  std::vector<double> x = random_values(in.size(), rng_), dy = random_values(out.size(), rng_);
  const DeviceArray x_d(in, x), dy_d(out, dy), y_d(out), dx_d(in);
  typed<void>(bf16(), [&](auto tag) {
    using T = decltype(tag);
    cuda::global_avg_pool_forward(stream_, n, c, h * w, bf16(), x_d.as<T>(), y_d.as<T>());
    cuda::global_avg_pool_backward(stream_, n, c, h * w, bf16(), dy_d.as<T>(), dx_d.as<T>());
  });
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<double> y(out.size()), dx(in.size());
  cpu::global_avg_pool_forward(n, c, h * w, x.data(), y.data());
  cpu::global_avg_pool_backward(n, c, h * w, dy.data(), dx.data());
  expect_close(y_d.logical(), y, tolerance(bf16()), name("global average pool forward"));
  expect_close(dx_d.logical(), dx, tolerance(bf16()), name("global average pool backward"));
}

TEST_P(GpuLayersTest, LinearMatchesReference) {
  DTRAIN_CUBLAS_CHECK(cublasCreate(&cublas_));
  DTRAIN_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  const cuda::LinearDims d{7, 129, 33};
  const Layout xl{d.batch, d.in_features, 1, 1, bf16()}, wl{d.out_features, d.in_features, 1, 1, bf16()},
      yl{d.batch, d.out_features, 1, 1, bf16()};
  std::vector<double> x = random_values(xl.size(), rng_), w = random_values(wl.size(), rng_),
                      dy = random_values(yl.size(), rng_);
  std::vector<double> bias = random_values(size_t(d.out_features), rng_);
  std::vector<float> bias_f(bias.begin(), bias.end());
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = bias_f[i];
  const DeviceArray x_d(xl, x), w_d(wl, w), dy_d(yl, dy), y_d(yl), dx_d(xl);
  test::DeviceVector<float> bias_d(bias_f), dw_d(wl.size()), db_d(bias.size());
  typed<void>(bf16(), [&](auto tag) {
    using T = decltype(tag);
    cuda::linear_forward(cublas_, d, false, x_d.as<T>(), w_d.as<T>(), bias_d.get(), y_d.as<T>());
    cuda::linear_backward(cublas_, d, false, x_d.as<T>(), w_d.as<T>(), dy_d.as<T>(), dx_d.as<T>(), dw_d.get(),
                          db_d.get());
  });
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<double> y(yl.size()), dx(xl.size()), dw(wl.size()), db(bias.size());
  cpu::linear_forward(d.batch, d.in_features, d.out_features, x.data(), w.data(), bias.data(), y.data());
  cpu::linear_backward(d.batch, d.in_features, d.out_features, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                       db.data());
  const std::vector<float> dw_got = dw_d.to_host(), db_got = db_d.to_host();
  expect_close(y_d.logical(), y, tolerance(bf16()), name("linear forward"));
  expect_close(dx_d.logical(), dx, tolerance(bf16()), name("linear input gradient"));
  expect_close({dw_got.begin(), dw_got.end()}, dw, tolerance(bf16()), name("linear weight gradient"));
  expect_close({db_got.begin(), db_got.end()}, db, tolerance(bf16()), name("linear bias gradient"));
}

TEST_P(GpuLayersTest, ReluWithResidualMatchesReference) {
  const Layout l{2, 5, 3, 4, bf16()};
  std::vector<double> x = random_values(l.size(), rng_), r = random_values(l.size(), rng_),
                      dy = random_values(l.size(), rng_);
  const DeviceArray x_d(l, x), r_d(l, r), dy_d(l, dy), y_d(l), dx_d(l), dr_d(l);
  typed<void>(bf16(), [&](auto tag) {
    using T = decltype(tag);
    cuda::relu_forward(stream_, int64_t(l.size()), x_d.as<T>(), r_d.as<T>(), y_d.as<T>());
    cuda::relu_backward(stream_, int64_t(l.size()), y_d.as<T>(), dy_d.as<T>(), dx_d.as<T>(), dr_d.as<T>());
  });
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<double> sum(l.size()), y(l.size()), dx(l.size());
  cpu::residual_add_forward(x.data(), r.data(), sum.data(), int64_t(l.size()));
  cpu::relu_forward(sum.data(), y.data(), int64_t(l.size()));
  // The reference's mask is the rounded output's sign, as on the GPU.
  const std::vector<double> y_got = y_d.logical();
  cpu::relu_backward(y_got.data(), dy.data(), dx.data(), int64_t(l.size()));
  expect_close(y_got, y, tolerance(bf16()), name("relu(x + residual) forward"));
  expect_close(dx_d.logical(), dx, 0.0, name("relu backward"));
  expect_close(dr_d.logical(), dx, 0.0, name("relu backward, residual gradient"));
}

// The layer, not just the kernel: weights uploaded from a host ParameterSet (KCRS; KRSC on the
// device in bf16), forward, and the weight gradient back in the fp32 flat buffer (widened from
// cuDNN's bf16 on the bf16 path), for the RGB stem's 3 input channels and for 16.
TEST_P(GpuLayersTest, Conv2dLayerMatchesReference) {
  for (const int in_channels : {3, 16}) {
    Conv2dShape s;
    s.batch = 2, s.in_channels = in_channels, s.in_h = 11, s.in_w = 9, s.out_channels = 8;
    s.kernel_h = s.kernel_w = 3, s.stride_h = s.stride_w = 2, s.pad_h = s.pad_w = 1;
    ParameterSet layout;
    const int id = layout.add("c.weight", {s.out_channels, s.in_channels, 3, 3}, ParamKind::kWeight);
    layout.finalize();
    std::vector<double> w = random_values(size_t(s.filter_size()), rng_);
    for (size_t i = 0; i < w.size(); ++i) {
      // The reference sees the values the layer computes with: bf16-rounded on the bf16 path.
      const float f = static_cast<float>(w[i]);
      layout.param(id)[i] = f;
      w[i] = bf16() ? runtime::to_float(runtime::to_bfloat16(f)) : f;
    }
    cuda::GpuContext context(0, bf16() ? cuda::ConvNumerics::kBf16Nhwc : cuda::ConvNumerics::kFp32Nchw, false);
    cuda::DeviceParameters params(layout, context);
    params.upload();
    cuda::GpuConv2d conv(context, params, "c", s.in_channels, s.out_channels, 3, 2, 1);

    const Layout in{s.batch, s.in_channels, s.in_h, s.in_w, bf16()},
        out{s.batch, s.out_channels, s.out_h(), s.out_w(), bf16()};
    std::vector<double> x = random_values(in.size(), rng_), dy = random_values(out.size(), rng_);
    const DeviceArray x_d(in, x), dy_d(out, dy);
    runtime::Tensor x_t(context.activation_dtype(), {s.batch, s.in_channels, s.in_h, s.in_w},
                        runtime::MemoryKind::kDevice);
    runtime::Tensor dy_t(context.activation_dtype(), {s.batch, s.out_channels, s.out_h(), s.out_w()},
                         runtime::MemoryKind::kDevice);
    DTRAIN_CUDA_CHECK(cudaMemcpy(x_t.raw(), x_d.as<void>(), x_t.bytes(), cudaMemcpyDeviceToDevice));
    DTRAIN_CUDA_CHECK(cudaMemcpy(dy_t.raw(), dy_d.as<void>(), dy_t.bytes(), cudaMemcpyDeviceToDevice));
    const runtime::Tensor& y_t = conv.forward(x_t);
    conv.backward_weights(dy_t);
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
    const DeviceArray y_d(out);
    DTRAIN_CUDA_CHECK(cudaMemcpy(y_d.as<void>(), y_t.raw(), y_t.bytes(), cudaMemcpyDeviceToDevice));
    params.download(/*gradients=*/true);

    std::vector<double> y(out.size()), dw(w.size()), columns(size_t(s.column_size()));
    cpu::conv2d_forward(s, x.data(), w.data(), y.data(), columns.data());
    cpu::conv2d_backward_filter(s, x.data(), dy.data(), dw.data(), columns.data());
    const std::vector<double> dw_got(layout.grad(id), layout.grad(id) + dw.size());
    const std::string shape = " (" + std::to_string(in_channels) + " input channels)";
    expect_close(y_d.logical(), y, tolerance(bf16()), name("conv2d layer forward" + shape));
    expect_close(dw_got, dw, tolerance(bf16()), name("conv2d layer weight gradient" + shape));
  }
}

INSTANTIATE_TEST_SUITE_P(Numerics, GpuLayersTest, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& param_info) {
                           return param_info.param ? "Bf16Nhwc" : "Fp32Nchw";
                         });

#else
TEST(GpuLayersTest, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::models
