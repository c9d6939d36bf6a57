// The GPU engine: GpuTrainStep on the rank's GPU, with NCCL (or the configured backend) averaging
// the gradients on the device. Losses are read back only when the Trainer asks (each logging
// interval and the epoch's end), so steps queue without the host waiting.
#include <memory>
#include <sstream>
#include <string>

#include "comm/factory.h"
#include "comm/gradient_buckets.h"
#include "runtime/core/error.h"
#include "runtime/core/gpu_binding.h"
#include "runtime/train/cuda/gpu_train_step.h"
#include "runtime/train/step_engine.h"

namespace dtrain::train {
namespace {

class GpuStepEngine final : public StepEngine {
 public:
  GpuStepEngine(const EngineSetup& setup, const core::RankContext& ctx, int gpu) {
    const TrainConfig& c = setup.config;
    DTRAIN_USAGE_CHECK(c.gradient_wire_dtype() == "fp32")
        << "gradient_wire_dtype " << c.gradient_wire_dtype() << ": the GPU path all-reduces fp32 gradients";
    cuda::GpuStepOptions o;
    o.model = setup.model;
    o.numerics = c.precision() == "fp32" ? models::cuda::ConvNumerics::kFp32Nchw : models::cuda::ConvNumerics::kBf16Nhwc;
    o.allow_tf32 = !c.no_tf32();
    o.batch = c.batch_per_rank();
    o.height = setup.image.height;
    o.width = setup.image.width;
    for (int i = 0; i < 3; ++i) o.mean[i] = setup.mean[i], o.std[i] = setup.std[i];
    o.sgd = SgdOptions{c.momentum(), c.weight_decay(), c.nesterov()};
    o.exempt_norm_and_bias_from_decay = c.exclude_norm_and_bias_from_decay();
    o.label_smoothing = static_cast<float>(c.label_smoothing());
    o.bucket_bytes = static_cast<size_t>(c.bucket_mib()) << 20;
    comm_ = comm::make_communicator(comm::parse_backend(c.backend(), "backend"), ctx, true);
    step_ = std::make_unique<cuda::GpuTrainStep>(o, comm_.get(), gpu);
    momentum_.assign(static_cast<size_t>(step_->model().parameters().parameter_count()), 0.0f);
    std::ostringstream text;
    text << "GPU " << gpu << " (" << core::visible_gpus().at(static_cast<size_t>(gpu)).name << "), "
         << (c.precision() == "fp32" ? (c.no_tf32() ? "fp32 NCHW, TF32 off" : "fp32 NCHW, TF32 on") : "bf16 NHWC")
         << ", gradients over " << comm_->name();
    description_ = text.str();
  }

  std::string describe() const override { return description_; }

  void train_step(const Batch& b, float lr) override {
    DTRAIN_CHECK(b.size == step_->options().batch) << "GPU step of batch " << step_->options().batch << " got "
                                                   << b.size << " images";
    step_->run(static_cast<const uint8_t*>(b.pixels.data()), b.labels.data(), lr);
    step_->wait_input_copied();  // the loader refills this batch's memory next
  }

  double last_loss() override { return step_->last_result().mean_loss; }
  bool loss_is_free() const override { return false; }

  const std::vector<float>& evaluate(const Batch& b) override {
    return step_->evaluate(static_cast<const uint8_t*>(b.pixels.data()), b.size);
  }

  models::ParameterSet& parameters() override { return step_->model().parameters(); }
  std::vector<float>& momentum() override { return momentum_; }
  void sync_to_host() override {
    step_->model().sync_to_host();
    step_->momentum_to_host(momentum_);
  }
  void load_from_host() override { step_->load_from_host(momentum_); }
  size_t gradient_buckets() const override {
    const int64_t count = step_->model().parameters().parameter_count();
    return comm::GradientBuckets(static_cast<size_t>(count), step_->options().bucket_bytes).size();
  }

 private:
  std::unique_ptr<comm::Communicator> comm_;
  std::unique_ptr<cuda::GpuTrainStep> step_;
  std::vector<float> momentum_;
  std::string description_;
};

}  // namespace

std::unique_ptr<StepEngine> make_gpu_step_engine(const EngineSetup& setup, const core::RankContext& ctx, int gpu) {
  return std::make_unique<GpuStepEngine>(setup, ctx, gpu);
}

}  // namespace dtrain::train
