// CPU layers: forward against an independent float64 reference, and every backward against
// central finite differences in float64, on fresh random inputs including odd shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "models/cpu/batch_norm.h"
#include "models/cpu/conv2d.h"
#include "models/cpu/elementwise.h"
#include "models/cpu/linear.h"
#include "models/cpu/pooling.h"
#include "models/cpu/softmax_cross_entropy.h"
#include "runtime/base/error.h"
#include "tests/support/test_seed.h"

namespace dtrain::models::cpu {
namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 engine(dtrain::test::random_seed());
  return engine;
}

std::vector<double> random_vector(size_t n, double low = -1, double high = 1) {
  std::uniform_real_distribution<double> dist(low, high);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng());
  return v;
}

std::vector<float> to_float(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks analytic[j] == d loss / d x[j] by central differences for every j; loss() reads x.
void expect_gradient(const char* what, std::vector<double>& x, const std::vector<double>& analytic,
                     const std::function<double()>& loss) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const double h = 1e-6;
  size_t wrong = 0;
  size_t first = 0;
  double first_numeric = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    const double saved = x[j];
    x[j] = saved + h;
    const double up = loss();
    x[j] = saved - h;
    const double down = loss();
    x[j] = saved;
    const double numeric = (up - down) / (2 * h);
    if (!(std::fabs(numeric - analytic[j]) <= 1e-6 * std::max(1.0, std::fabs(numeric)))) {
      if (wrong++ == 0) {
        first = j;
        first_numeric = numeric;
      }
    }
  }
  EXPECT_EQ(wrong, 0u) << what << ": element " << first << " analytic " << analytic[first] << " numeric "
                       << first_numeric;
}

// Direct 7-loop convolution in float64: the independent reference for im2col + GEMM.
std::vector<double> naive_conv(const Conv2dShape& p, const std::vector<double>& x, const std::vector<double>& w) {
  std::vector<double> y(static_cast<size_t>(p.output_size()), 0.0);
  for (int n = 0; n < p.batch; ++n)
    for (int k = 0; k < p.out_channels; ++k)
      for (int oh = 0; oh < p.out_h(); ++oh)
        for (int ow = 0; ow < p.out_w(); ++ow) {
          double sum = 0;
          for (int c = 0; c < p.in_channels; ++c)
            for (int r = 0; r < p.kernel_h; ++r)
              for (int s = 0; s < p.kernel_w; ++s) {
                const int ih = oh * p.stride_h - p.pad_h + r, iw = ow * p.stride_w - p.pad_w + s;
                if (ih < 0 || ih >= p.in_h || iw < 0 || iw >= p.in_w) continue;
                sum += x[((size_t(n) * p.in_channels + c) * p.in_h + ih) * p.in_w + iw] *
                       w[((size_t(k) * p.in_channels + c) * p.kernel_h + r) * p.kernel_w + s];
              }
          y[((size_t(n) * p.out_channels + k) * p.out_h() + oh) * p.out_w() + ow] = sum;
        }
  return y;
}

std::vector<Conv2dShape> conv_shapes() {
  return {
      {2, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1},    // 3x3 same padding, non-square
      {1, 5, 9, 9, 3, 3, 3, 2, 2, 1, 1},    // stride 2 (ResNet v1.5's downsampling 3x3)
      {3, 4, 6, 6, 6, 1, 1, 2, 2, 0, 0},    // 1x1 stride 2 projection shortcut
      {1, 3, 11, 13, 2, 7, 7, 2, 2, 3, 3},  // 7x7 stem
      {2, 2, 5, 4, 3, 2, 3, 1, 2, 0, 1},    // asymmetric everything
  };
}

TEST(Conv2d, FloatForwardMatchesDirectFloat64Convolution) {
  for (const Conv2dShape& p : conv_shapes()) {
    validate(p);
    const auto x = random_vector(static_cast<size_t>(p.input_size()));
    const auto w = random_vector(static_cast<size_t>(p.filter_size()));
    const auto ref = naive_conv(p, x, w);
    std::vector<float> y(ref.size(), std::nanf("")), cols(static_cast<size_t>(p.column_size()));
    const auto xf = to_float(x), wf = to_float(w);
    conv2d_forward(p, xf.data(), wf.data(), y.data(), cols.data());
    const double fan_in = double(p.in_channels) * p.kernel_h * p.kernel_w;
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_NEAR(y[i], ref[i], 1e-6 * fan_in) << "output " << i;
    }
  }
}

TEST(Conv2d, BackwardMatchesFiniteDifferences) {
  for (const Conv2dShape& p : conv_shapes()) {
    auto x = random_vector(static_cast<size_t>(p.input_size()));
    auto w = random_vector(static_cast<size_t>(p.filter_size()));
    const auto r = random_vector(static_cast<size_t>(p.output_size()));  // loss = <conv(x, w), r>
    std::vector<double> cols(static_cast<size_t>(p.column_size())), y(r.size());
    auto loss = [&] {
      conv2d_forward(p, x.data(), w.data(), y.data(), cols.data());
      return dot(y, r);
    };
    std::vector<double> dx(x.size()), dw(w.size());
    conv2d_backward_data(p, r.data(), w.data(), dx.data(), cols.data());
    conv2d_backward_filter(p, x.data(), r.data(), dw.data(), cols.data());
    expect_gradient("conv2d dx", x, dx, loss);
    expect_gradient("conv2d dw", w, dw, loss);
  }
}

TEST(Conv2d, RejectsKernelsLargerThanThePaddedInput) {
  EXPECT_THROW(validate(Conv2dShape{1, 1, 2, 2, 1, 3, 3, 1, 1, 0, 0}), runtime::UsageError);
  EXPECT_THROW(validate(Conv2dShape{0, 1, 2, 2, 1, 1, 1, 1, 1, 0, 0}), runtime::UsageError);
}

TEST(BatchNorm, TrainingForwardNormalizesAndUpdatesRunningStatsLikePyTorch) {
  const BatchNormShape s{3, 4, 5 * 3};
  const auto x = random_vector(size_t(3) * 4 * 15, -2, 3);
  const auto gamma = random_vector(4, 0.5, 1.5), beta = random_vector(4);
  std::vector<double> y(x.size()), mean(4), inv_std(4), running_mean(4, 0.0), running_var(4, 1.0);
  batch_norm_forward_train(s, x.data(), gamma.data(), beta.data(), y.data(), mean.data(), inv_std.data(),
                           running_mean.data(), running_var.data());
  for (int c = 0; c < 4; ++c) {
    double sum = 0, sq = 0, ysum = 0;
    const int m = 3 * 15;
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 15; ++i) sum += x[(size_t(n) * 4 + c) * 15 + i];
    const double mu = sum / m;
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 15; ++i) {
        sq += std::pow(x[(size_t(n) * 4 + c) * 15 + i] - mu, 2);
        ysum += y[(size_t(n) * 4 + c) * 15 + i];
      }
    EXPECT_NEAR(ysum / m, beta[c], 1e-12) << "normalized output has mean beta";
    EXPECT_NEAR(running_mean[c], 0.1 * mu, 1e-12);
    EXPECT_NEAR(running_var[c], 0.9 + 0.1 * sq / (m - 1), 1e-12) << "unbiased variance, momentum 0.1";
    EXPECT_NEAR(inv_std[c], 1 / std::sqrt(sq / m + 1e-5), 1e-12) << "biased variance plus eps";
  }
  std::vector<double> eval(y.size());
  batch_norm_forward_eval(s, x.data(), gamma.data(), beta.data(), running_mean.data(), running_var.data(), eval.data());
  EXPECT_NEAR(eval[0], gamma[0] * (x[0] - running_mean[0]) / std::sqrt(running_var[0] + 1e-5) + beta[0], 1e-12);
}

TEST(BatchNorm, BackwardMatchesFiniteDifferences) {
  for (const BatchNormShape& s : {BatchNormShape{2, 3, 7}, BatchNormShape{5, 1, 1}, BatchNormShape{1, 2, 9}}) {
    auto x = random_vector(size_t(s.batch) * s.channels * s.spatial, -2, 2);
    auto gamma = random_vector(size_t(s.channels), 0.5, 1.5);
    auto beta = random_vector(size_t(s.channels));
    const auto r = random_vector(x.size());
    std::vector<double> y(x.size()), mean(gamma.size()), inv_std(gamma.size()), rm(gamma.size()), rv(gamma.size());
    auto loss = [&] {
      batch_norm_forward_train(s, x.data(), gamma.data(), beta.data(), y.data(), mean.data(), inv_std.data(), rm.data(),
                               rv.data());
      return dot(y, r);
    };
    loss();
    std::vector<double> dx(x.size()), dgamma(gamma.size()), dbeta(beta.size());
    batch_norm_backward(s, x.data(), r.data(), gamma.data(), mean.data(), inv_std.data(), dx.data(), dgamma.data(),
                        dbeta.data());
    expect_gradient("batch norm dx", x, dx, loss);
    expect_gradient("batch norm dgamma", gamma, dgamma, loss);
    expect_gradient("batch norm dbeta", beta, dbeta, loss);
  }
}

TEST(Elementwise, ReluAndResidualAdd) {
  auto x = random_vector(101);
  for (double& v : x) v += v > 0 ? 1e-3 : -1e-3;  // keep finite differences off the kink
  const auto r = random_vector(x.size());
  std::vector<double> y(x.size()), dx(x.size());
  auto loss = [&] {
    relu_forward(x.data(), y.data(), int64_t(x.size()));
    return dot(y, r);
  };
  loss();
  relu_backward(y.data(), r.data(), dx.data(), int64_t(x.size()));
  expect_gradient("relu dx", x, dx, loss);

  const auto a = to_float(random_vector(33)), b = to_float(random_vector(33));
  std::vector<float> sum(33);
  residual_add_forward(a.data(), b.data(), sum.data(), 33);
  for (int i = 0; i < 33; ++i) EXPECT_EQ(sum[i], a[i] + b[i]);
}

TEST(Pooling, MaxPoolForwardAndBackward) {
  for (const PoolShape& s :
       {PoolShape{2, 3, 7, 6, 3, 2, 1}, PoolShape{1, 2, 5, 5, 2, 2, 0}, PoolShape{1, 1, 4, 3, 3, 1, 1}}) {
    // Distinct inputs, evenly spaced and shuffled: a window whose two largest entries lie within
    // the difference step of each other would have no derivative to check.
    std::vector<double> x(size_t(s.batch) * s.channels * s.in_h * s.in_w);
    for (size_t i = 0; i < x.size(); ++i) x[i] = -1 + 2 * double(i) / double(x.size());
    std::shuffle(x.begin(), x.end(), rng());
    const size_t out = size_t(s.batch) * s.channels * s.out_h() * s.out_w();
    const auto r = random_vector(out);
    std::vector<double> y(out);
    std::vector<int32_t> arg(out);
    auto loss = [&] {
      max_pool_forward(s, x.data(), y.data(), arg.data());
      return dot(y, r);
    };
    loss();
    // Forward against a direct maximum.
    for (size_t i = 0; i < out; ++i) {
      const size_t plane = i / (size_t(s.out_h()) * s.out_w());
      EXPECT_EQ(y[i], x[plane * s.in_h * s.in_w + size_t(arg[i])]);
    }
    std::vector<double> dx(x.size());
    max_pool_backward(s, r.data(), arg.data(), dx.data());
    expect_gradient("max pool dx", x, dx, loss);
  }
}

TEST(Pooling, GlobalAveragePool) {
  auto x = random_vector(size_t(3) * 5 * 7);
  const auto r = random_vector(15);
  std::vector<double> y(15), dx(x.size());
  auto loss = [&] {
    global_avg_pool_forward(3, 5, 7, x.data(), y.data());
    return dot(y, r);
  };
  loss();
  global_avg_pool_backward(3, 5, 7, r.data(), dx.data());
  expect_gradient("global avg pool dx", x, dx, loss);
}

TEST(Linear, ForwardAndBackward) {
  const int batch = 3, in = 7, out = 5;
  auto x = random_vector(size_t(batch) * in), w = random_vector(size_t(out) * in), b = random_vector(out);
  const auto r = random_vector(size_t(batch) * out);
  std::vector<double> y(r.size());
  auto loss = [&] {
    linear_forward(batch, in, out, x.data(), w.data(), b.data(), y.data());
    return dot(y, r);
  };
  loss();
  for (int i = 0; i < out; ++i) {
    double direct = b[size_t(i)];
    for (int k = 0; k < in; ++k) direct += x[size_t(k)] * w[size_t(i) * in + size_t(k)];
    EXPECT_NEAR(y[size_t(i)], direct, 1e-12);
  }
  std::vector<double> dx(x.size()), dw(w.size()), db(b.size());
  linear_backward(batch, in, out, x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data());
  expect_gradient("linear dx", x, dx, loss);
  expect_gradient("linear dw", w, dw, loss);
  expect_gradient("linear db", b, db, loss);
}

TEST(SoftmaxCrossEntropy, LossAndGradientWithAndWithoutSmoothing) {
  const int batch = 4, classes = 6;
  for (double smoothing : {0.0, 0.1}) {
    auto z = random_vector(size_t(batch) * classes, -3, 3);
    const std::vector<int32_t> labels = {0, 5, 2, 2};
    std::vector<double> dz(z.size());
    const double loss_value = softmax_cross_entropy(batch, classes, z.data(), labels.data(), smoothing, dz.data());
    // Direct float64 formula.
    double expected = 0;
    for (int b = 0; b < batch; ++b) {
      double sum = 0;
      for (int j = 0; j < classes; ++j) sum += std::exp(z[size_t(b) * classes + size_t(j)]);
      for (int j = 0; j < classes; ++j) {
        const double q = (j == labels[size_t(b)] ? 1 - smoothing : 0) + smoothing / classes;
        expected -= q * std::log(std::exp(z[size_t(b) * classes + size_t(j)]) / sum);
      }
    }
    EXPECT_NEAR(loss_value, expected / batch, 1e-12);
    auto loss = [&] {
      return softmax_cross_entropy<double>(batch, classes, z.data(), labels.data(), smoothing, nullptr);
    };
    expect_gradient("cross-entropy dlogits", z, dz, loss);
  }
  std::vector<double> z(6, 0.0);
  const int32_t bad = 6;
  EXPECT_THROW(softmax_cross_entropy<double>(1, 6, z.data(), &bad, 0.0, nullptr), runtime::UsageError);
}

}  // namespace
}  // namespace dtrain::models::cpu
