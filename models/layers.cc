#include "models/layers.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "models/cpu/batch_norm.h"
#include "models/cpu/elementwise.h"
#include "models/cpu/linear.h"
#include "runtime/base/error.h"

namespace dtrain::models {

runtime::Tensor& ensure_shape(runtime::Tensor& t, const runtime::Shape& shape) {
  if (t.shape() != shape || t.dtype() != runtime::DType::kF32) t = runtime::Tensor(runtime::DType::kF32, shape);
  return t;
}

namespace {

void expect_rank(const runtime::Tensor& x, size_t rank, const char* layer) {
  DTRAIN_CHECK(x.shape().size() == rank) << layer << " expects a rank-" << rank << " input, got "
                                         << runtime::shape_string(x.shape());
}

}  // namespace

// --- Conv2d ----------------------------------------------------------------------------------

Conv2d::Conv2d(ParameterSet& params, const std::string& name, int in_channels, int out_channels, int kernel, int stride,
               int pad)
    : params_(params), weight_(declare(params, name, in_channels, out_channels, kernel)) {
  shape_.in_channels = in_channels;
  shape_.out_channels = out_channels;
  shape_.kernel_h = shape_.kernel_w = kernel;
  shape_.stride_h = shape_.stride_w = stride;
  shape_.pad_h = shape_.pad_w = pad;
}

const runtime::Tensor& Conv2d::forward(const runtime::Tensor& x, bool) {
  expect_rank(x, 4, "conv2d");
  DTRAIN_CHECK(x.shape()[1] == shape_.in_channels)
      << "conv2d with " << shape_.in_channels << " input channels got " << runtime::shape_string(x.shape());
  shape_.batch = static_cast<int>(x.shape()[0]);
  shape_.in_h = static_cast<int>(x.shape()[2]);
  shape_.in_w = static_cast<int>(x.shape()[3]);
  validate(shape_);
  input_ = &x;
  columns_.resize(static_cast<size_t>(shape_.column_size()));
  ensure_shape(output_, {shape_.batch, shape_.out_channels, shape_.out_h(), shape_.out_w()});
  cpu::conv2d_forward(shape_, x.data<float>(), params_.param(weight_), output_.data<float>(), columns_.data());
  return output_;
}

const runtime::Tensor& Conv2d::backward(const runtime::Tensor& dy) {
  ensure_shape(dx_, input_->shape());
  cpu::conv2d_backward_filter(shape_, input_->data<float>(), dy.data<float>(), params_.grad(weight_), columns_.data());
  params_.gradient_ready(weight_);
  cpu::conv2d_backward_data(shape_, dy.data<float>(), params_.param(weight_), dx_.data<float>(), columns_.data());
  return dx_;
}

void Conv2d::initialize(ParameterSet& params, std::mt19937_64& rng) {
  initialize_weight(params, weight_, rng);
}

int Conv2d::declare(ParameterSet& params, const std::string& name, int in_channels, int out_channels, int kernel) {
  return params.add(name + ".weight", {out_channels, in_channels, kernel, kernel}, ParamKind::kWeight);
}

void Conv2d::initialize_weight(ParameterSet& params, int weight, std::mt19937_64& rng) {
  const runtime::Shape& shape = params.slot(weight).shape;  // [out, in, kh, kw]
  const double fan_out = double(shape[0]) * double(shape[2]) * double(shape[3]);
  std::normal_distribution<double> dist(0.0, std::sqrt(2.0 / fan_out));
  float* w = params.param(weight);
  for (int64_t i = 0; i < params.slot(weight).numel; ++i) w[i] = static_cast<float>(dist(rng));
}

// --- BatchNorm2d -----------------------------------------------------------------------------

BatchNorm2d::BatchNorm2d(ParameterSet& params, const std::string& name, int channels)
    : params_(params), channels_(channels), slots_(declare(params, name, channels)) {}

const runtime::Tensor& BatchNorm2d::forward(const runtime::Tensor& x, bool training) {
  expect_rank(x, 4, "batch norm");
  DTRAIN_CHECK(x.shape()[1] == channels_)
      << "batch norm of " << channels_ << " channels got " << runtime::shape_string(x.shape());
  const cpu::BatchNormShape s{static_cast<int>(x.shape()[0]), channels_, x.shape()[2] * x.shape()[3]};
  input_ = &x;
  ensure_shape(output_, x.shape());
  if (training) {
    saved_mean_.resize(static_cast<size_t>(channels_));
    saved_inv_std_.resize(static_cast<size_t>(channels_));
    std::vector<double> mean(static_cast<size_t>(channels_)), m2(static_cast<size_t>(channels_));
    cpu::batch_norm_moments(s, x.data<float>(), mean.data(), m2.data());
    group_count_ = int64_t{s.batch} * s.spatial;
    if (synchronizes(reducer_)) {
      group_count_ = merge_moments_over_group(*reducer_, channels_, group_count_, mean.data(), m2.data());
    }
    cpu::batch_norm_normalize(s, group_count_, mean.data(), m2.data(), x.data<float>(), params_.param(slots_.gamma),
                              params_.param(slots_.beta), output_.data<float>(), saved_mean_.data(),
                              saved_inv_std_.data(), params_.state(slots_.running_mean),
                              params_.state(slots_.running_var));
  } else {
    cpu::batch_norm_forward_eval(s, x.data<float>(), params_.param(slots_.gamma), params_.param(slots_.beta),
                                 params_.state(slots_.running_mean), params_.state(slots_.running_var),
                                 output_.data<float>());
  }
  return output_;
}

const runtime::Tensor& BatchNorm2d::backward(const runtime::Tensor& dy) {
  const runtime::Shape& shape = input_->shape();
  const cpu::BatchNormShape s{static_cast<int>(shape[0]), channels_, shape[2] * shape[3]};
  ensure_shape(dx_, shape);
  // [sum(dy) | sum(dy * xhat)] in one buffer: synchronized BN exchanges both in one call.
  std::vector<double> sums(2 * static_cast<size_t>(channels_));
  double* sum_dy = sums.data();
  double* sum_dy_xhat = sums.data() + channels_;
  cpu::batch_norm_backward_sums(s, input_->data<float>(), dy.data<float>(), saved_mean_.data(), saved_inv_std_.data(),
                                sum_dy, sum_dy_xhat);
  float* dgamma = params_.grad(slots_.gamma);
  float* dbeta = params_.grad(slots_.beta);
  for (int c = 0; c < channels_; ++c) {
    dgamma[c] = static_cast<float>(sum_dy_xhat[c]);
    dbeta[c] = static_cast<float>(sum_dy[c]);
  }
  if (synchronizes(reducer_)) sum_over_group(*reducer_, sums.data(), sums.size());
  cpu::batch_norm_backward_dx(s, group_count_, input_->data<float>(), dy.data<float>(), params_.param(slots_.gamma),
                              saved_mean_.data(), saved_inv_std_.data(), sum_dy, sum_dy_xhat, dx_.data<float>());
  params_.gradient_ready(slots_.beta);  // beta was registered after gamma, so it sits first in the buffer
  params_.gradient_ready(slots_.gamma);
  return dx_;
}

void BatchNorm2d::initialize(ParameterSet& params, std::mt19937_64&) {
  initialize_slots(params, slots_, false);
}

BatchNorm2d::Slots BatchNorm2d::declare(ParameterSet& params, const std::string& name, int channels) {
  Slots s{};
  s.gamma = params.add(name + ".weight", {channels}, ParamKind::kNormScale);
  s.beta = params.add(name + ".bias", {channels}, ParamKind::kBias);
  s.running_mean = params.add_state(name + ".running_mean", channels);
  s.running_var = params.add_state(name + ".running_var", channels);
  return s;
}

BatchNorm2d::Slots BatchNorm2d::find(const ParameterSet& params, const std::string& name) {
  return Slots{params.find(name + ".weight"), params.find(name + ".bias"), params.find_state(name + ".running_mean"),
               params.find_state(name + ".running_var")};
}

void BatchNorm2d::initialize_slots(ParameterSet& params, const Slots& slots, bool zero_gamma) {
  const int64_t channels = params.slot(slots.gamma).numel;
  std::fill(params.param(slots.gamma), params.param(slots.gamma) + channels, zero_gamma ? 0.0f : 1.0f);
  std::fill(params.param(slots.beta), params.param(slots.beta) + channels, 0.0f);
  std::fill(params.state(slots.running_mean), params.state(slots.running_mean) + channels, 0.0f);
  std::fill(params.state(slots.running_var), params.state(slots.running_var) + channels, 1.0f);
}

// --- ReLU, pooling -----------------------------------------------------------------------------

const runtime::Tensor& ReLU::forward(const runtime::Tensor& x, bool) {
  ensure_shape(output_, x.shape());
  cpu::relu_forward(x.data<float>(), output_.data<float>(), x.numel());
  return output_;
}

const runtime::Tensor& ReLU::backward(const runtime::Tensor& dy) {
  ensure_shape(dx_, output_.shape());
  cpu::relu_backward(output_.data<float>(), dy.data<float>(), dx_.data<float>(), dy.numel());
  return dx_;
}

const runtime::Tensor& MaxPool2d::forward(const runtime::Tensor& x, bool) {
  expect_rank(x, 4, "max pool");
  shape_ = cpu::PoolShape{static_cast<int>(x.shape()[0]),
                          static_cast<int>(x.shape()[1]),
                          static_cast<int>(x.shape()[2]),
                          static_cast<int>(x.shape()[3]),
                          window_,
                          stride_,
                          pad_};
  ensure_shape(output_, {x.shape()[0], x.shape()[1], shape_.out_h(), shape_.out_w()});
  argmax_.resize(static_cast<size_t>(output_.numel()));
  cpu::max_pool_forward(shape_, x.data<float>(), output_.data<float>(), argmax_.data());
  return output_;
}

const runtime::Tensor& MaxPool2d::backward(const runtime::Tensor& dy) {
  ensure_shape(dx_, {shape_.batch, shape_.channels, shape_.in_h, shape_.in_w});
  cpu::max_pool_backward(shape_, dy.data<float>(), argmax_.data(), dx_.data<float>());
  return dx_;
}

const runtime::Tensor& GlobalAvgPool::forward(const runtime::Tensor& x, bool) {
  expect_rank(x, 4, "global average pool");
  input_shape_ = x.shape();
  ensure_shape(output_, {x.shape()[0], x.shape()[1]});
  cpu::global_avg_pool_forward(static_cast<int>(x.shape()[0]), static_cast<int>(x.shape()[1]),
                               x.shape()[2] * x.shape()[3], x.data<float>(), output_.data<float>());
  return output_;
}

const runtime::Tensor& GlobalAvgPool::backward(const runtime::Tensor& dy) {
  ensure_shape(dx_, input_shape_);
  cpu::global_avg_pool_backward(static_cast<int>(input_shape_[0]), static_cast<int>(input_shape_[1]),
                                input_shape_[2] * input_shape_[3], dy.data<float>(), dx_.data<float>());
  return dx_;
}

// --- Linear ------------------------------------------------------------------------------------

Linear::Linear(ParameterSet& params, const std::string& name, int in_features, int out_features)
    : params_(params), in_(in_features), out_(out_features), slots_(declare(params, name, in_features, out_features)) {}

const runtime::Tensor& Linear::forward(const runtime::Tensor& x, bool) {
  expect_rank(x, 2, "linear");
  DTRAIN_CHECK(x.shape()[1] == in_) << "linear of " << in_ << " inputs got " << runtime::shape_string(x.shape());
  input_ = &x;
  const int batch = static_cast<int>(x.shape()[0]);
  ensure_shape(output_, {batch, out_});
  cpu::linear_forward(batch, in_, out_, x.data<float>(), params_.param(slots_.weight), params_.param(slots_.bias),
                      output_.data<float>());
  return output_;
}

const runtime::Tensor& Linear::backward(const runtime::Tensor& dy) {
  const int batch = static_cast<int>(input_->shape()[0]);
  ensure_shape(dx_, input_->shape());
  cpu::linear_backward(batch, in_, out_, input_->data<float>(), params_.param(slots_.weight), dy.data<float>(),
                       dx_.data<float>(), params_.grad(slots_.weight), params_.grad(slots_.bias));
  params_.gradient_ready(slots_.bias);
  params_.gradient_ready(slots_.weight);
  return dx_;
}

void Linear::initialize(ParameterSet& params, std::mt19937_64& rng) {
  initialize_slots(params, slots_, rng);
}

Linear::Slots Linear::declare(ParameterSet& params, const std::string& name, int in_features, int out_features) {
  Slots s{};
  s.weight = params.add(name + ".weight", {out_features, in_features}, ParamKind::kWeight);
  s.bias = params.add(name + ".bias", {out_features}, ParamKind::kBias);
  return s;
}

Linear::Slots Linear::find(const ParameterSet& params, const std::string& name) {
  return Slots{params.find(name + ".weight"), params.find(name + ".bias")};
}

void Linear::initialize_slots(ParameterSet& params, const Slots& slots, std::mt19937_64& rng) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(params.slot(slots.weight).shape[1]));
  std::uniform_real_distribution<double> dist(-bound, bound);
  float* weight = params.param(slots.weight);
  for (int64_t i = 0; i < params.slot(slots.weight).numel; ++i) weight[i] = static_cast<float>(dist(rng));
  float* bias = params.param(slots.bias);
  for (int64_t i = 0; i < params.slot(slots.bias).numel; ++i) bias[i] = static_cast<float>(dist(rng));
}

// --- Sequential --------------------------------------------------------------------------------

const runtime::Tensor& Sequential::forward(const runtime::Tensor& x, bool training) {
  const runtime::Tensor* current = &x;
  for (auto& m : modules_) current = &m->forward(*current, training);
  return *current;
}

const runtime::Tensor& Sequential::backward(const runtime::Tensor& dy) {
  const runtime::Tensor* current = &dy;
  for (auto it = modules_.rbegin(); it != modules_.rend(); ++it) current = &(*it)->backward(*current);
  return *current;
}

void Sequential::initialize(ParameterSet& params, std::mt19937_64& rng) {
  for (auto& m : modules_) m->initialize(params, rng);
}

}  // namespace dtrain::models
