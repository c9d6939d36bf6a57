#pragma once
// The ResNet family on one GPU: the layers of resnet_plan.h run by the GPU layers (gpu_layers.h) in
// the context's numerics.
//
// The parameters live on the device (DeviceParameters). Their host copy is a ParameterSet of the
// plan's layout, initialized from the plan (deterministic for a seed, so CPU and GPU replicas start
// identical) and then only a snapshot: checkpoints and tests fill it when they need it
// (sync_to_host()). It holds no host gradients unless a caller asks for them.
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
#include "models/resnet_plan.h"

namespace dtrain::models::cuda {

class GpuResNet final : public Module {
 public:
  GpuResNet(const ResNetConfig& config, GpuContext& context);
  ~GpuResNet() override;

  const runtime::Tensor& forward(const runtime::Tensor& x, bool training) override;
  const runtime::Tensor& backward(const runtime::Tensor& dlogits) override;
  // Re-initializes `params` (this model's host copy) from `rng` and uploads it.
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;

  // The host copy: as initialized, or as of the last sync_to_host().
  ParameterSet& parameters() { return host_params_; }
  DeviceParameters& device_parameters() { return device_params_; }
  GpuContext& context() { return context_; }
  // Device parameters, state (and gradients when asked) into the host mirror. Synchronizes.
  void sync_to_host(bool gradients = false) { device_params_.download(gradients); }

 public:
  class Block;  // a residual block (gpu_resnet.cc)

 private:
  GpuContext& context_;
  ResNetPlan plan_;
  ParameterSet host_params_;
  DeviceParameters device_params_;
  std::unique_ptr<GpuConv2d> stem_conv_;
  std::unique_ptr<GpuNormAct> stem_norm_;
  std::unique_ptr<GpuMaxPool2d> stem_pool_;  // absent for the small-input stem
  std::vector<std::unique_ptr<Block>> blocks_;
  std::unique_ptr<GpuGlobalAvgPool> pool_;
  std::unique_ptr<GpuLinear> fc_;
  runtime::Tensor no_input_gradient_;
};

}  // namespace dtrain::models::cuda
