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
// Outputs and what backward reads (ReLU masks, max-pool indices) live until the owner's backward
// no longer needs them: the owner then calls release_saved() (or release_output()), the memory
// goes back to the caching allocator for the gradients of the layers below, and the next forward
// takes it back from the cache. An input gradient lives only until its consumer is queued: the
// owner then calls release_input_gradient(), and the memory goes back to the caching allocator
// for the next layer's gradient. Activations and gradients are allocated
// without a stream tag, and all untagged device memory of a process is used on the context's
// stream only (scratch of other streams carries their tag), so stream order makes that reuse safe. That keeps
// backward's gradients to a few live tensors instead of one per layer (bench/results/2026-11-24_h200/memory).
#include <memory>
#include <string>

#include "models/cpu/pooling.h"
#include "models/cuda/cudnn_conv2d.h"
#include "models/cuda/device_parameters.h"
#include "models/cuda/gpu_context.h"
#include "runtime/memory/buffer.h"
#include "runtime/memory/tensor.h"

namespace dtrain::models::cuda {

// Reuses `t` when it already is a device tensor of `dtype` and `shape`.
runtime::Tensor& ensure_device_tensor(runtime::Tensor& t, runtime::DType dtype, const runtime::Shape& shape);

class GpuConv2d {
 public:
  GpuConv2d(GpuContext& context, DeviceParameters& params, const std::string& name, int in_channels, int out_channels,
            int kernel, int stride, int pad);
  const runtime::Tensor& forward(const runtime::Tensor& x);
  // The weight gradient (reported ready).
  void backward_weights(const runtime::Tensor& dy);
  // The input gradient into dx (shaped like the input), added to it when accumulate.
  void backward_data(const runtime::Tensor& dy, runtime::Tensor& dx, bool accumulate);
  // Both, the input gradient into the layer's own tensor.
  const runtime::Tensor& backward(const runtime::Tensor& dy);
  void release_input_gradient() { dx_ = runtime::Tensor(); }
  // Once the output's consumers have run forward and backward.
  void release_output() { output_ = runtime::Tensor(); }

 private:
  const void* weight();

  GpuContext& context_;
  DeviceParameters& params_;
  int weight_;
  Conv2dShape geometry_;
  std::unique_ptr<CudnnConv2d> conv_;  // rebuilt when the input shape changes (cuDNN's choices are cached)
  const runtime::Tensor* input_ = nullptr;
  runtime::Tensor output_, dx_;
};

// Batch norm with optional ReLU and optional fused residual add, or, for a model built without
// batch norm (empty bn_name), just the ReLU (+ residual).
class GpuNormAct {
 public:
  GpuNormAct(GpuContext& context, DeviceParameters& params, const std::string& bn_name, int channels, bool relu);
  // y = act(norm(x) [+ residual]).
  const runtime::Tensor& forward(const runtime::Tensor& x, const runtime::Tensor* residual, bool training);
  // Returns dx; writes the residual's gradient into *dresidual (shaped like dy) when not null.
  const runtime::Tensor& backward(const runtime::Tensor& dy, runtime::Tensor* dresidual);
  bool has_batch_norm() const { return gamma_ >= 0; }
  void release_input_gradient() { dx_ = runtime::Tensor(); }
  // The output, once its consumers have run forward, where backward does not read it (batch norm
  // reads its input and ReLU mask instead): a residual shortcut's, dead once added.
  void release_output();
  // The output and the ReLU mask, once this layer's backward and the output's consumers' are
  // queued; a backward needs a training forward again.
  void release_saved();

 private:
  GpuContext& context_;
  DeviceParameters& params_;
  int channels_;
  bool relu_;
  int gamma_ = -1, beta_ = -1, running_mean_ = -1, running_var_ = -1;
  const runtime::Tensor* input_ = nullptr;
  bool trained_forward_ = false;  // the last forward was a training one (backward needs its statistics and mask)
  runtime::Tensor output_, dx_;
  runtime::Buffer saved_mean_, saved_inv_std_;
  runtime::Buffer relu_mask_;  // the last training forward's, 1 bit per element (batch norm with ReLU)
};

class GpuMaxPool2d {
 public:
  GpuMaxPool2d(GpuContext& context, int window, int stride, int pad);
  const runtime::Tensor& forward(const runtime::Tensor& x);
  const runtime::Tensor& backward(const runtime::Tensor& dy);
  void release_input_gradient() { dx_ = runtime::Tensor(); }
  // The output and the indices, once backward and the output's consumers' are queued.
  void release_saved() {
    output_ = runtime::Tensor();
    argmax_ = runtime::Buffer();
  }

 private:
  GpuContext& context_;
  cpu::PoolShape shape_;
  runtime::Tensor output_, dx_;
  runtime::Buffer argmax_;
};

// [N, C, H, W] -> [N, C].
class GpuGlobalAvgPool {
 public:
  explicit GpuGlobalAvgPool(GpuContext& context) : context_(context) {}
  const runtime::Tensor& forward(const runtime::Tensor& x);
  const runtime::Tensor& backward(const runtime::Tensor& dy);
  void release_input_gradient() { dx_ = runtime::Tensor(); }

 private:
  GpuContext& context_;
  runtime::Shape input_shape_;
  runtime::Tensor output_, dx_;
};

class GpuLinear {
 public:
  GpuLinear(GpuContext& context, DeviceParameters& params, const std::string& name, int in_features, int out_features);
  const runtime::Tensor& forward(const runtime::Tensor& x);
  const runtime::Tensor& backward(const runtime::Tensor& dy);

 private:
  GpuContext& context_;
  DeviceParameters& params_;
  int in_, out_;
  int weight_, bias_;
  const runtime::Tensor* input_ = nullptr;
  runtime::Tensor output_, dx_;
};

}  // namespace dtrain::models::cuda
