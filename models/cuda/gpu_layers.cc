#include "models/cuda/gpu_layers.h"

#include <cuda_runtime_api.h>

#include "models/cuda/batch_norm.h"
#include "models/cuda/elementwise.h"
#include "models/cuda/linear.h"
#include "models/cuda/op_timer.h"
#include "models/cuda/pooling.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_check.h"

namespace dtrain::models::cuda {
namespace {

// Calls fn with a value of the context's activation element type (float or runtime::bfloat16).
template <typename Fn>
void with_element_type(const GpuContext& context, Fn&& fn) {
  if (context.bf16()) {
    fn(runtime::bfloat16{});
  } else {
    fn(float{});
  }
}

template <typename T>
const T* as(const runtime::Tensor& t) {
  return static_cast<const T*>(t.raw());
}
template <typename T>
T* as(runtime::Tensor& t) {
  return static_cast<T*>(t.raw());
}

void expect_channels(const runtime::Tensor& x, size_t rank, int64_t channels, const char* layer) {
  DTRAIN_CHECK(x.shape().size() == rank && x.shape()[1] == channels)
      << layer << " expects a rank-" << rank << " input with " << channels << " channels, got "
      << runtime::shape_string(x.shape());
}

}  // namespace

runtime::Tensor& ensure_device_tensor(runtime::Tensor& t, runtime::DType dtype, const runtime::Shape& shape) {
  if (t.shape() != shape || t.dtype() != dtype || t.kind() != runtime::MemoryKind::kDevice) {
    t = runtime::Tensor(dtype, shape, runtime::MemoryKind::kDevice);
  }
  return t;
}

// --- GpuConv2d ------------------------------------------------------------------------------

GpuConv2d::GpuConv2d(GpuContext& context, DeviceParameters& params, const std::string& name, int in_channels,
                     int out_channels, int kernel, int stride, int pad)
    : context_(context), params_(params), weight_(params.layout().find(name + ".weight")) {
  geometry_.in_channels = in_channels;
  geometry_.out_channels = out_channels;
  geometry_.kernel_h = geometry_.kernel_w = kernel;
  geometry_.stride_h = geometry_.stride_w = stride;
  geometry_.pad_h = geometry_.pad_w = pad;
}

const void* GpuConv2d::weight() {
  return context_.bf16() ? static_cast<const void*>(params_.weights<runtime::bfloat16>(weight_))
                         : static_cast<const void*>(params_.weights<float>(weight_));
}

const runtime::Tensor& GpuConv2d::forward(const runtime::Tensor& x) {
  expect_channels(x, 4, geometry_.in_channels, "conv2d");
  const int batch = static_cast<int>(x.shape()[0]), height = static_cast<int>(x.shape()[2]),
            width = static_cast<int>(x.shape()[3]);
  if (!conv_ || geometry_.batch != batch || geometry_.in_h != height || geometry_.in_w != width) {
    geometry_.batch = batch;
    geometry_.in_h = height;
    geometry_.in_w = width;
    conv_ = std::make_unique<CudnnConv2d>(context_.cudnn(), geometry_, context_.numerics(), context_.allow_tf32());
  }
  input_ = &x;
  ensure_device_tensor(output_, context_.activation_dtype(),
                       {batch, geometry_.out_channels, geometry_.out_h(), geometry_.out_w()});
  const OpTimer::Scope timed(context_.op_timer(), OpTimer::kConvForward);
  conv_->forward(x.raw(), weight(), output_.raw());
  return output_;
}

void GpuConv2d::backward_weights(const runtime::Tensor& dy) {
  const OpTimer::Scope timed(context_.op_timer(), OpTimer::kConvWeightGrad);
  if (context_.bf16()) {
    // Scratch on the compute stream: the next user of the block, on the same stream, runs after
    // the widening (one block for every layer instead of a bf16 copy of all the weights).
    const int64_t numel = params_.layout().slot(weight_).numel;
    runtime::Buffer bf16_grad(runtime::MemoryKind::kDevice, static_cast<size_t>(numel) * 2, context_.stream());
    conv_->backward_filter(input_->raw(), dy.raw(), bf16_grad.data());
    widen_bf16(context_.stream(), numel, static_cast<const runtime::bfloat16*>(bf16_grad.data()),
               params_.grad(weight_));
  } else {
    conv_->backward_filter(input_->raw(), dy.raw(), params_.grad(weight_));
  }
  params_.gradient_ready(weight_);
}

void GpuConv2d::backward_data(const runtime::Tensor& dy, runtime::Tensor& dx, bool accumulate) {
  DTRAIN_CHECK(dx.shape() == input_->shape()) << "conv2d input gradient shaped " << runtime::shape_string(dx.shape())
                                              << ", input " << runtime::shape_string(input_->shape());
  const OpTimer::Scope timed(context_.op_timer(), OpTimer::kConvDataGrad);
  conv_->backward_data(dy.raw(), weight(), dx.raw(), accumulate);
}

const runtime::Tensor& GpuConv2d::backward(const runtime::Tensor& dy) {
  backward_weights(dy);
  ensure_device_tensor(dx_, context_.activation_dtype(), input_->shape());
  backward_data(dy, dx_, false);
  return dx_;
}

// --- GpuNormAct -----------------------------------------------------------------------------

GpuNormAct::GpuNormAct(GpuContext& context, DeviceParameters& params, const std::string& bn_name, int channels,
                       bool relu)
    : context_(context), params_(params), channels_(channels), relu_(relu) {
  if (bn_name.empty()) {
    DTRAIN_CHECK(relu) << "a normalization-free GpuNormAct must apply ReLU, or it does nothing";
    return;
  }
  const ParameterSet& layout = params.layout();
  gamma_ = layout.find(bn_name + ".weight");
  beta_ = layout.find(bn_name + ".bias");
  running_mean_ = layout.find_state(bn_name + ".running_mean");
  running_var_ = layout.find_state(bn_name + ".running_var");
  saved_mean_ = runtime::Buffer(runtime::MemoryKind::kDevice, sizeof(float) * channels, context.stream());
  saved_inv_std_ = runtime::Buffer(runtime::MemoryKind::kDevice, sizeof(float) * channels, context.stream());
}

const runtime::Tensor& GpuNormAct::forward(const runtime::Tensor& x, const runtime::Tensor* residual, bool training) {
  expect_channels(x, 4, channels_, "batch norm / activation");
  DTRAIN_CHECK(residual == nullptr || residual->shape() == x.shape())
      << "residual shaped " << runtime::shape_string(residual->shape()) << " added to "
      << runtime::shape_string(x.shape());
  input_ = &x;
  trained_forward_ = training;
  ensure_device_tensor(output_, context_.activation_dtype(), x.shape());
  if (training && relu_ && has_batch_norm() && relu_mask_.bytes() != relu_mask_bytes(x.numel())) {
    relu_mask_ = runtime::Buffer(runtime::MemoryKind::kDevice, relu_mask_bytes(x.numel()), context_.stream());
  }
  with_element_type(context_, [&](auto tag) {
    const OpTimer::Scope timed(context_.op_timer(), OpTimer::kNormActForward);
    using T = decltype(tag);
    const T* res = residual != nullptr ? as<T>(*residual) : nullptr;
    if (!has_batch_norm()) {
      relu_forward(context_.stream(), x.numel(), as<T>(x), res, as<T>(output_));
      return;
    }
    const BatchNormDims dims{{static_cast<int>(x.shape()[0]), channels_, x.shape()[2] * x.shape()[3]},
                             context_.channels_last()};
    if (training) {
      batch_norm_forward_train(context_.stream(), dims, as<T>(x), params_.param(gamma_), params_.param(beta_), res,
                               relu_, as<T>(output_), static_cast<float*>(saved_mean_.data()),
                               static_cast<float*>(saved_inv_std_.data()), params_.state(running_mean_),
                               params_.state(running_var_), static_cast<uint8_t*>(relu_mask_.data()),
                               context_.batch_stats_reducer());
    } else {
      batch_norm_forward_eval(context_.stream(), dims, as<T>(x), params_.param(gamma_), params_.param(beta_),
                              params_.state(running_mean_), params_.state(running_var_), res, relu_, as<T>(output_));
    }
  });
  return output_;
}

const runtime::Tensor& GpuNormAct::backward(const runtime::Tensor& dy, runtime::Tensor* dresidual) {
  DTRAIN_CHECK(dy.shape() == input_->shape())
      << "batch norm / activation gradient shaped " << runtime::shape_string(dy.shape());
  DTRAIN_CHECK(dresidual == nullptr || dresidual->shape() == dy.shape()) << "residual gradient shaped wrong";
  DTRAIN_CHECK(trained_forward_ || !has_batch_norm())
      << "batch norm backward after an eval forward: it needs the batch statistics and ReLU mask of a training one";
  ensure_device_tensor(dx_, context_.activation_dtype(), dy.shape());
  with_element_type(context_, [&](auto tag) {
    const OpTimer::Scope timed(context_.op_timer(), OpTimer::kNormActBackward);
    using T = decltype(tag);
    T* dres = dresidual != nullptr ? as<T>(*dresidual) : nullptr;
    if (!has_batch_norm()) {
      DTRAIN_CHECK(output_.shape() == dy.shape()) << "ReLU backward without its forward's output (released)";
      relu_backward(context_.stream(), dy.numel(), as<T>(output_), as<T>(dy), as<T>(dx_), dres);
      return;
    }
    const BatchNormDims dims{{static_cast<int>(dy.shape()[0]), channels_, dy.shape()[2] * dy.shape()[3]},
                             context_.channels_last()};
    batch_norm_backward(context_.stream(), dims, as<T>(*input_), static_cast<const uint8_t*>(relu_mask_.data()),
                        as<T>(dy), params_.param(gamma_), static_cast<const float*>(saved_mean_.data()),
                        static_cast<const float*>(saved_inv_std_.data()), relu_, as<T>(dx_), dres, params_.grad(gamma_),
                        params_.grad(beta_), context_.batch_stats_reducer());
  });
  if (has_batch_norm()) {
    // Beta was registered after gamma, so it sits first in the buffer: reporting it first keeps the
    // ranges in buffer order, as the step profile and its bucket model take them.
    params_.gradient_ready(beta_);
    params_.gradient_ready(gamma_);
  }
  return dx_;
}

void GpuNormAct::release_output() {
  DTRAIN_CHECK(has_batch_norm() || !relu_) << "a ReLU without batch norm reads its output in backward";
  output_ = runtime::Tensor();
}

void GpuNormAct::release_saved() {
  output_ = runtime::Tensor();
  relu_mask_ = runtime::Buffer();
  trained_forward_ = false;
}

// --- GpuMaxPool2d ---------------------------------------------------------------------------

GpuMaxPool2d::GpuMaxPool2d(GpuContext& context, int window, int stride, int pad) : context_(context) {
  shape_.window = window;
  shape_.stride = stride;
  shape_.pad = pad;
}

const runtime::Tensor& GpuMaxPool2d::forward(const runtime::Tensor& x) {
  DTRAIN_CHECK(x.shape().size() == 4) << "max pool expects NCHW, got " << runtime::shape_string(x.shape());
  shape_.batch = static_cast<int>(x.shape()[0]);
  shape_.channels = static_cast<int>(x.shape()[1]);
  shape_.in_h = static_cast<int>(x.shape()[2]);
  shape_.in_w = static_cast<int>(x.shape()[3]);
  ensure_device_tensor(output_, context_.activation_dtype(),
                       {shape_.batch, shape_.channels, shape_.out_h(), shape_.out_w()});
  const size_t argmax_bytes = static_cast<size_t>(output_.numel()) * sizeof(int32_t);
  if (argmax_.bytes() != argmax_bytes)
    argmax_ = runtime::Buffer(runtime::MemoryKind::kDevice, argmax_bytes, context_.stream());
  with_element_type(context_, [&](auto tag) {
    const OpTimer::Scope timed(context_.op_timer(), OpTimer::kPoolForward);
    using T = decltype(tag);
    max_pool_forward(context_.stream(), shape_, context_.channels_last(), as<T>(x), as<T>(output_),
                     static_cast<int32_t*>(argmax_.data()));
  });
  return output_;
}

const runtime::Tensor& GpuMaxPool2d::backward(const runtime::Tensor& dy) {
  DTRAIN_CHECK(argmax_.bytes() == static_cast<size_t>(dy.numel()) * sizeof(int32_t))
      << "max pool backward without its forward's indices (released), or a gradient shaped "
      << runtime::shape_string(dy.shape());
  ensure_device_tensor(dx_, context_.activation_dtype(), {shape_.batch, shape_.channels, shape_.in_h, shape_.in_w});
  with_element_type(context_, [&](auto tag) {
    const OpTimer::Scope timed(context_.op_timer(), OpTimer::kPoolBackward);
    using T = decltype(tag);
    max_pool_backward(context_.stream(), shape_, context_.channels_last(), as<T>(dy),
                      static_cast<const int32_t*>(argmax_.data()), as<T>(dx_));
  });
  return dx_;
}

// --- GpuGlobalAvgPool -----------------------------------------------------------------------

const runtime::Tensor& GpuGlobalAvgPool::forward(const runtime::Tensor& x) {
  DTRAIN_CHECK(x.shape().size() == 4) << "global average pool expects NCHW, got " << runtime::shape_string(x.shape());
  input_shape_ = x.shape();
  ensure_device_tensor(output_, context_.activation_dtype(), {x.shape()[0], x.shape()[1]});
  with_element_type(context_, [&](auto tag) {
    const OpTimer::Scope timed(context_.op_timer(), OpTimer::kPoolForward);
    using T = decltype(tag);
    global_avg_pool_forward(context_.stream(), static_cast<int>(x.shape()[0]), static_cast<int>(x.shape()[1]),
                            x.shape()[2] * x.shape()[3], context_.channels_last(), as<T>(x), as<T>(output_));
  });
  return output_;
}

const runtime::Tensor& GpuGlobalAvgPool::backward(const runtime::Tensor& dy) {
  ensure_device_tensor(dx_, context_.activation_dtype(), input_shape_);
  with_element_type(context_, [&](auto tag) {
    const OpTimer::Scope timed(context_.op_timer(), OpTimer::kPoolBackward);
    using T = decltype(tag);
    global_avg_pool_backward(context_.stream(), static_cast<int>(input_shape_[0]), static_cast<int>(input_shape_[1]),
                             input_shape_[2] * input_shape_[3], context_.channels_last(), as<T>(dy), as<T>(dx_));
  });
  return dx_;
}

// --- GpuLinear ------------------------------------------------------------------------------

GpuLinear::GpuLinear(GpuContext& context, DeviceParameters& params, const std::string& name, int in_features,
                     int out_features)
    : context_(context),
      params_(params),
      in_(in_features),
      out_(out_features),
      weight_(params.layout().find(name + ".weight")),
      bias_(params.layout().find(name + ".bias")) {}

const runtime::Tensor& GpuLinear::forward(const runtime::Tensor& x) {
  expect_channels(x, 2, in_, "linear");
  input_ = &x;
  const LinearDims dims{static_cast<int>(x.shape()[0]), in_, out_};
  ensure_device_tensor(output_, context_.activation_dtype(), {x.shape()[0], out_});
  with_element_type(context_, [&](auto tag) {
    const OpTimer::Scope timed(context_.op_timer(), OpTimer::kLinearForward);
    using T = decltype(tag);
    linear_forward(context_.cublas(), dims, context_.allow_tf32(), as<T>(x), params_.weights<T>(weight_),
                   params_.param(bias_), as<T>(output_));
  });
  return output_;
}

const runtime::Tensor& GpuLinear::backward(const runtime::Tensor& dy) {
  const LinearDims dims{static_cast<int>(input_->shape()[0]), in_, out_};
  ensure_device_tensor(dx_, context_.activation_dtype(), input_->shape());
  with_element_type(context_, [&](auto tag) {
    const OpTimer::Scope timed(context_.op_timer(), OpTimer::kLinearBackward);
    using T = decltype(tag);
    linear_backward(context_.cublas(), dims, context_.allow_tf32(), as<T>(*input_), params_.weights<T>(weight_),
                    as<T>(dy), as<T>(dx_), params_.grad(weight_), params_.grad(bias_));
  });
  params_.gradient_ready(bias_);
  params_.gradient_ready(weight_);
  return dx_;
}

}  // namespace dtrain::models::cuda
