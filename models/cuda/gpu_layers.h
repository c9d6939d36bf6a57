#pragma once
// The layers of the ResNet family on the GPU, over one model replica's GpuContext and
// DeviceParameters: the GPU counterparts of models/layers.h, with the fusions the GPU wants
// (batch norm + ReLU, batch norm + residual add + ReLU, gradient accumulation in the convolution's
// input-gradient pass). Tensors are device tensors with their logical NCHW (or [N, features])
// shape, stored as the context says (fp32 NCHW or bf16 NHWC).
//
// Same contract as Module: forward keeps a pointer to its input, which the caller keeps alive
// until backward; outputs and input gradients are owned by the layer; each parameter gradient is
// written (not added) once per backward and reported with gradient_ready().
//
// Outputs are kept from step to step (backward needs them). An input gradient lives only until its
// consumer is queued: the owner then calls release_input_gradient(), and the memory goes back to
// the caching allocator for the next layer's gradient. Activations and gradients are allocated
// without a stream tag, and all untagged device memory of a process is used on the context's
// stream only (scratch of other streams carries their tag), so stream order makes that reuse safe. That keeps
// backward's gradients to a few live tensors instead of one per layer (bench/results/2026-11-24_h200/memory).
#include <memory>
#include <string>

#include "models/cpu/pooling.h"
#include "models/cuda/cudnn_conv2d.h"
#include "models/cuda/device_parameters.h"
#include "models/cuda/gpu_context.h"
#include "runtime/core/buffer.h"
#include "runtime/core/tensor.h"

namespace dtrain::models::cuda {

// Reuses `t` when it already is a device tensor of `dtype` and `shape`.
core::Tensor& ensure_device_tensor(core::Tensor& t, core::DType dtype, const core::Shape& shape);

class GpuConv2d {
 public:
  GpuConv2d(GpuContext& context, DeviceParameters& params, const std::string& name, int in_channels, int out_channels,
            int kernel, int stride, int pad);
  const core::Tensor& forward(const core::Tensor& x);
  // The weight gradient (reported ready).
  void backward_weights(const core::Tensor& dy);
  // The input gradient into dx (shaped like the input), added to it when accumulate.
  void backward_data(const core::Tensor& dy, core::Tensor& dx, bool accumulate);
  // Both, the input gradient into the layer's own tensor.
  const core::Tensor& backward(const core::Tensor& dy);
  const core::Shape& input_shape() const { return input_->shape(); }
  void release_input_gradient() { dx_ = core::Tensor(); }

 private:
  const void* weight();

  GpuContext& context_;
  DeviceParameters& params_;
  int weight_;
  Conv2dShape geometry_;
  std::unique_ptr<CudnnConv2d> conv_;  // rebuilt when the input shape changes (cuDNN's choices are cached)
  const core::Tensor* input_ = nullptr;
  core::Tensor output_, dx_;
  core::Buffer weight_grad_bf16_;  // bf16 numerics: cuDNN's dw, widened into the fp32 gradients
};

// Batch norm with optional ReLU and optional fused residual add, or, for a model built without
// batch norm (empty bn_name), just the ReLU (+ residual).
class GpuNormAct {
 public:
  GpuNormAct(GpuContext& context, DeviceParameters& params, const std::string& bn_name, int channels, bool relu);
  // y = act(norm(x) [+ residual]).
  const core::Tensor& forward(const core::Tensor& x, const core::Tensor* residual, bool training);
  // Returns dx; writes the residual's gradient into *dresidual (shaped like dy) when not null.
  const core::Tensor& backward(const core::Tensor& dy, core::Tensor* dresidual);
  bool has_batch_norm() const { return gamma_ >= 0; }
  void release_input_gradient() { dx_ = core::Tensor(); }

 private:
  GpuContext& context_;
  DeviceParameters& params_;
  int channels_;
  bool relu_;
  int gamma_ = -1, beta_ = -1, running_mean_ = -1, running_var_ = -1;
  const core::Tensor* input_ = nullptr;
  bool trained_forward_ = false;  // the last forward was a training one (backward needs its statistics and mask)
  core::Tensor output_, dx_;
  core::Buffer saved_mean_, saved_inv_std_;
  core::Buffer relu_mask_;  // the last training forward's, 1 bit per element (batch norm with ReLU)
};

class GpuMaxPool2d {
 public:
  GpuMaxPool2d(GpuContext& context, int window, int stride, int pad);
  const core::Tensor& forward(const core::Tensor& x);
  const core::Tensor& backward(const core::Tensor& dy);
  void release_input_gradient() { dx_ = core::Tensor(); }

 private:
  GpuContext& context_;
  cpu::PoolShape shape_;
  core::Tensor output_, dx_;
  core::Buffer argmax_;
};

// [N, C, H, W] -> [N, C].
class GpuGlobalAvgPool {
 public:
  explicit GpuGlobalAvgPool(GpuContext& context) : context_(context) {}
  const core::Tensor& forward(const core::Tensor& x);
  const core::Tensor& backward(const core::Tensor& dy);
  void release_input_gradient() { dx_ = core::Tensor(); }

 private:
  GpuContext& context_;
  core::Shape input_shape_;
  core::Tensor output_, dx_;
};

class GpuLinear {
 public:
  GpuLinear(GpuContext& context, DeviceParameters& params, const std::string& name, int in_features, int out_features);
  const core::Tensor& forward(const core::Tensor& x);
  const core::Tensor& backward(const core::Tensor& dy);

 private:
  GpuContext& context_;
  DeviceParameters& params_;
  int in_, out_;
  int weight_, bias_;
  const core::Tensor* input_ = nullptr;
  core::Tensor output_, dx_;
};

}  // namespace dtrain::models::cuda
