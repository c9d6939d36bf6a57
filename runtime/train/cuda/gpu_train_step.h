#pragma once
// One rank's training step on its GPU (the GPU path of DESIGN.md's step): the uint8 batch crosses
// PCIe on a copy stream, is normalized and cast on the compute stream, forward, loss, backward
// with each gradient bucket's all-reduce queued on a comm stream as soon as backward has written
// it, then the fused SGD update. run() only queues work: the host never waits for the GPU inside
// a step, so it runs ahead and the GPU never idles between steps.
//
// Input: [batch, H, W, C] uint8 images (C = the model's input channels, 1 to 4) and [batch] int32
// labels in page-locked host memory (the copy is asynchronous). They must stay untouched until
// wait_input_copied() returns.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "models/cuda/gpu_context.h"
#include "models/cuda/gpu_resnet.h"
#include "models/resnet.h"
#include "runtime/core/buffer.h"
#include "runtime/core/cuda/stream.h"
#include "runtime/train/cuda/device_gradient_sync.h"
#include "runtime/train/sgd.h"

namespace dtrain::train::cuda {

struct GpuStepOptions {
  models::ResNetConfig model;
  models::cuda::ConvNumerics numerics = models::cuda::ConvNumerics::kBf16Nhwc;
  bool allow_tf32 = true;  // fp32 numerics only
  int batch = 0, height = 0, width = 0;
  float mean[3] = {0.485f, 0.456f, 0.406f};
  float std[3] = {0.229f, 0.224f, 0.225f};
  SgdOptions sgd;
  bool exempt_norm_and_bias_from_decay = false;
  float label_smoothing = 0.0f;
  size_t bucket_bytes = size_t{25} << 20;
};

struct StepResult {
  float mean_loss = 0;  // this rank's batch
  int top1_hits = 0;
};

class GpuTrainStep {
 public:
  // Collective over comm (null or size 1: no gradient averaging): broadcasts rank 0's parameters
  // and state. `device` is this rank's GPU.
  GpuTrainStep(const GpuStepOptions& options, comm::Communicator* comm, int device);
  ~GpuTrainStep();

  void run(const uint8_t* images, const int32_t* labels, float lr);
  void wait_input_copied();
  // Evaluation-mode logits of `count` images (any count), on the host. Synchronous.
  const std::vector<float>& evaluate(const uint8_t* images, int count);
  // Takes parameters and BN state from the host mirror (model().parameters()) and `momentum` on
  // rank 0 and gives them to every rank (after a resume). Collective.
  void load_from_host(const std::vector<float>& momentum);
  // Loss and hits of the latest step; waits for it.
  StepResult last_result();
  void synchronize();

  models::cuda::GpuResNet& model() { return *model_; }
  models::cuda::GpuContext& context() { return *context_; }
  // The momentum buffer into `out` (resized). Synchronizes.
  void momentum_to_host(std::vector<float>& out);
  const GpuStepOptions& options() const { return options_; }
  int buckets_during_backward() const { return sync_ ? sync_->launched_during_backward() : 0; }

 private:
  void broadcast_from_rank0();
  // uint8 NHWC pixels already on the device -> `out` in the context's type and layout.
  void normalize(const void* device_pixels, int count, core::Tensor& out);

  GpuStepOptions options_;
  comm::Communicator* comm_;
  std::unique_ptr<models::cuda::GpuContext> context_;
  std::unique_ptr<models::cuda::GpuResNet> model_;
  std::unique_ptr<DeviceGradientSync> sync_;
  core::CudaStream copy_stream_;
  // Two device input slots, so the copy of step k+1 overlaps step k.
  core::Buffer images_[2], labels_[2];
  core::CudaEvent copied_[2], consumed_[2];
  int slot_ = 0;
  bool any_step_ = false;
  core::Tensor input_, dlogits_, eval_input_;
  core::Buffer eval_images_;
  std::vector<float> eval_logits_;
  core::Buffer momentum_, decay_ranges_, loss_, hits_;
  int decay_range_count_ = 0;
};

}  // namespace dtrain::train::cuda
