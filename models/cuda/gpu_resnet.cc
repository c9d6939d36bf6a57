#include "models/cuda/gpu_resnet.h"

#include <functional>
#include <string>

#include "runtime/base/error.h"

namespace dtrain::models::cuda {

// relu(branch(x) + shortcut(x)). The branch is a chain of conv -> norm-act stages whose last one
// adds the shortcut before its ReLU; the shortcut is the identity or conv (+ BN).
class GpuResNet::Block {
 public:
  struct Stage {
    std::unique_ptr<GpuConv2d> conv;
    std::unique_ptr<GpuNormAct> norm;
  };

  Block(std::vector<Stage> branch, Stage shortcut) : branch_(std::move(branch)), shortcut_(std::move(shortcut)) {}

  const runtime::Tensor& forward(const runtime::Tensor& x, bool training) {
    input_ = &x;
    const runtime::Tensor* h = &x;
    for (size_t i = 0; i + 1 < branch_.size(); ++i)
      h = &branch_[i].norm->forward(branch_[i].conv->forward(*h), nullptr, training);
    const runtime::Tensor* skip = &x;
    if (shortcut_.conv) {
      skip = &shortcut_.conv->forward(x);
      if (shortcut_.norm) skip = &shortcut_.norm->forward(*skip, nullptr, training);
    }
    Stage& last = branch_.back();
    const runtime::Tensor& y = last.norm->forward(last.conv->forward(*h), skip, training);
    // The shortcut's batch norm output is dead once added (its backward reads its input).
    if (shortcut_.norm) shortcut_.norm->release_output();
    return y;
  }

  // The branch's gradients first (they precede the shortcut's in the flat buffer), then the
  // shortcut's; the branch's input gradient is added to the shortcut's by the first convolution.
  // Each intermediate gradient is released as soon as its consumer is queued (gpu_layers.h).
  const runtime::Tensor& backward(const runtime::Tensor& dy, runtime::DType dtype) {
    ensure_device_tensor(dx_, dtype, input_->shape());
    const bool identity = !shortcut_.conv;
    if (!identity) ensure_device_tensor(d_skip_, dtype, dy.shape());
    const runtime::Tensor* d = &branch_.back().norm->backward(dy, identity ? &dx_ : &d_skip_);
    for (size_t i = branch_.size() - 1; i > 0; --i) {
      const runtime::Tensor& dh = branch_[i].conv->backward(*d);
      branch_[i].norm->release_input_gradient();
      d = &branch_[i - 1].norm->backward(dh, nullptr);
      branch_[i].conv->release_input_gradient();
    }
    branch_[0].conv->backward_weights(*d);
    if (!identity) {
      const runtime::Tensor* ds = shortcut_.norm ? &shortcut_.norm->backward(d_skip_, nullptr) : &d_skip_;
      shortcut_.conv->backward_weights(*ds);
      shortcut_.conv->backward_data(*ds, dx_, false);
      if (shortcut_.norm) shortcut_.norm->release_input_gradient();
      d_skip_ = runtime::Tensor();
    }
    branch_[0].conv->backward_data(*d, dx_, true);
    branch_[0].norm->release_input_gradient();
    release_saved();
    return dx_;
  }
  void release_input_gradient() { dx_ = runtime::Tensor(); }

 private:
  // Once backward is queued, every output of the block is dead (the next block's backward, the
  // last reader of the block's output, ran before): the layers below take the memory for their
  // gradients, and the next forward takes it back from the cache.
  void release_saved() {
    for (Stage* stage : stages()) {
      stage->conv->release_output();
      if (stage->norm) stage->norm->release_saved();
    }
  }
  std::vector<Stage*> stages() {
    std::vector<Stage*> all;
    for (Stage& s : branch_) all.push_back(&s);
    if (shortcut_.conv) all.push_back(&shortcut_);
    return all;
  }

  std::vector<Stage> branch_;
  Stage shortcut_;
  const runtime::Tensor* input_ = nullptr;
  runtime::Tensor dx_, d_skip_;
};

namespace {

// One plan entry: the convolution, and its norm-act (BN and/or ReLU) when it has either.
GpuResNet::Block::Stage gpu_stage(GpuContext& context, DeviceParameters& params, const ConvNormSpec& s) {
  GpuResNet::Block::Stage stage;
  stage.conv =
      std::make_unique<GpuConv2d>(context, params, s.conv, s.in_channels, s.out_channels, s.kernel, s.stride, s.pad);
  if (!s.norm.empty() || s.relu)
    stage.norm = std::make_unique<GpuNormAct>(context, params, s.norm, s.out_channels, s.relu);
  return stage;
}

// The host copy of the plan's parameters, initialized.
ParameterSet initialized_parameters(const ResNetPlan& plan) {
  ParameterSet params;
  declare_parameters(plan, params);
  initialize_parameters(plan, params);
  return params;
}

}  // namespace

GpuResNet::GpuResNet(const ResNetConfig& config, GpuContext& context)
    : context_(context),
      plan_(resnet_plan(config)),
      host_params_(initialized_parameters(plan_)),
      device_params_(host_params_, context) {
  runtime::DeviceGuard on(context.device());
  auto stem = gpu_stage(context, device_params_, plan_.stem);
  stem_conv_ = std::move(stem.conv);
  stem_norm_ = std::move(stem.norm);
  if (plan_.stem_max_pool) stem_pool_ = std::make_unique<GpuMaxPool2d>(context, 3, 2, 1);
  for (const ResidualBlockSpec& spec : plan_.blocks) {
    std::vector<Block::Stage> branch;
    for (const ConvNormSpec& s : spec.branch) branch.push_back(gpu_stage(context, device_params_, s));
    Block::Stage shortcut;
    if (spec.shortcut) shortcut = gpu_stage(context, device_params_, *spec.shortcut);
    blocks_.push_back(std::make_unique<Block>(std::move(branch), std::move(shortcut)));
  }
  pool_ = std::make_unique<GpuGlobalAvgPool>(context);
  fc_ = std::make_unique<GpuLinear>(context, device_params_, plan_.classifier, plan_.features, plan_.num_classes);
  device_params_.upload();
}

GpuResNet::~GpuResNet() = default;

const runtime::Tensor& GpuResNet::forward(const runtime::Tensor& x, bool training) {
  DTRAIN_CHECK(x.kind() == runtime::MemoryKind::kDevice && x.dtype() == context_.activation_dtype())
      << "the GPU ResNet takes a device tensor of " << runtime::dtype_name(context_.activation_dtype());
  const runtime::Tensor* h = &stem_norm_->forward(stem_conv_->forward(x), nullptr, training);
  if (stem_pool_) h = &stem_pool_->forward(*h);
  for (auto& block : blocks_) h = &block->forward(*h, training);
  return fc_->forward(pool_->forward(*h));
}

const runtime::Tensor& GpuResNet::backward(const runtime::Tensor& dlogits) {
  // Each layer's input gradient is released once the next layer down has queued its use of it,
  // and each block's outputs once its backward is queued (the pooling head and classifier keep
  // theirs: the logits stay readable after backward).
  const runtime::Tensor* d = &pool_->backward(fc_->backward(dlogits));
  std::function<void()> release_previous = [this] { pool_->release_input_gradient(); };
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
    d = &(*it)->backward(*d, context_.activation_dtype());
    release_previous();
    release_previous = [block = it->get()] { block->release_input_gradient(); };
  }
  if (stem_pool_) {
    d = &stem_pool_->backward(*d);
    release_previous();
    release_previous = [this] { stem_pool_->release_input_gradient(); };
  }
  stem_conv_->backward_weights(stem_norm_->backward(*d, nullptr));
  release_previous();
  stem_norm_->release_input_gradient();
  if (stem_pool_) stem_pool_->release_saved();
  stem_norm_->release_saved();
  stem_conv_->release_output();
  return no_input_gradient_;
}

void GpuResNet::initialize(ParameterSet& params, std::mt19937_64& rng) {
  DTRAIN_CHECK(&params == &host_params_) << "GpuResNet::initialize takes its own host copy (parameters())";
  initialize_parameters(plan_, params, rng);
  device_params_.upload();
}

}  // namespace dtrain::models::cuda
