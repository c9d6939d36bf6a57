#pragma once
// The ResNet family on one GPU: models::ResNet's architecture and parameter layout, run by the GPU
// layers (gpu_layers.h) in the context's numerics.
//
// The host ResNet of the same config is kept as the layout and the host mirror: it initializes
// the parameters (deterministic for a seed, so CPU and GPU replicas start identical), and
// checkpoints and tests read the device values through it (sync_to_host()).
//
// forward() takes the normalized input batch as a device tensor [N, C, H, W] in the context's
// element type and layout and returns the logits [N, classes]. backward() takes dL/dlogits and
// writes every parameter gradient (reporting each with DeviceParameters::gradient_ready); it does
// not compute the gradient of the input image, which training never uses, and returns an empty
// tensor.
#include <memory>
#include <vector>

#include "models/cuda/device_parameters.h"
#include "models/cuda/gpu_context.h"
#include "models/cuda/gpu_layers.h"
#include "models/module.h"
#include "models/resnet.h"

namespace dtrain::models::cuda {

class GpuResNet final : public Module {
 public:
  GpuResNet(const ResNetConfig& config, GpuContext& context);
  ~GpuResNet() override;

  const core::Tensor& forward(const core::Tensor& x, bool training) override;
  const core::Tensor& backward(const core::Tensor& dlogits) override;
  // Re-initializes the host mirror from `rng` and uploads it.
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;

  ParameterSet& parameters() { return host_.parameters(); }
  DeviceParameters& device_parameters() { return device_params_; }
  GpuContext& context() { return context_; }
  // Device parameters, state (and gradients when asked) into the host mirror. Synchronizes.
  void sync_to_host(bool gradients = false) { device_params_.download(gradients); }

 public:
  class Block;  // a residual block (gpu_resnet.cc)

 private:
  GpuContext& context_;
  ResNet host_;
  DeviceParameters device_params_;
  std::unique_ptr<GpuConv2d> stem_conv_;
  std::unique_ptr<GpuNormAct> stem_norm_;
  std::unique_ptr<GpuMaxPool2d> stem_pool_;  // absent for the small-input stem
  std::vector<std::unique_ptr<Block>> blocks_;
  std::unique_ptr<GpuGlobalAvgPool> pool_;
  std::unique_ptr<GpuLinear> fc_;
  core::Tensor no_input_gradient_;
};

}  // namespace dtrain::models::cuda
