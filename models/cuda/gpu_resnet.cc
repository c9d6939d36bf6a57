#include "models/cuda/gpu_resnet.h"

#include <string>

#include "runtime/core/error.h"

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

  const core::Tensor& forward(const core::Tensor& x, bool training) {
    input_ = &x;
    const core::Tensor* h = &x;
    for (size_t i = 0; i + 1 < branch_.size(); ++i)
      h = &branch_[i].norm->forward(branch_[i].conv->forward(*h), nullptr, training);
    const core::Tensor* skip = &x;
    if (shortcut_.conv) {
      skip = &shortcut_.conv->forward(x);
      if (shortcut_.norm) skip = &shortcut_.norm->forward(*skip, nullptr, training);
    }
    Stage& last = branch_.back();
    return last.norm->forward(last.conv->forward(*h), skip, training);
  }

  // The branch's gradients first (they precede the shortcut's in the flat buffer), then the
  // shortcut's; the branch's input gradient is added to the shortcut's by the first convolution.
  const core::Tensor& backward(const core::Tensor& dy, core::DType dtype) {
    ensure_device_tensor(dx_, dtype, input_->shape());
    const bool identity = !shortcut_.conv;
    if (!identity) ensure_device_tensor(d_skip_, dtype, dy.shape());
    const core::Tensor* d = &branch_.back().norm->backward(dy, identity ? &dx_ : &d_skip_);
    for (size_t i = branch_.size() - 1; i > 0; --i)
      d = &branch_[i - 1].norm->backward(branch_[i].conv->backward(*d), nullptr);
    branch_[0].conv->backward_weights(*d);
    if (!identity) {
      const core::Tensor* ds = shortcut_.norm ? &shortcut_.norm->backward(d_skip_, nullptr) : &d_skip_;
      shortcut_.conv->backward_weights(*ds);
      shortcut_.conv->backward_data(*ds, dx_, false);
    }
    branch_[0].conv->backward_data(*d, dx_, true);
    return dx_;
  }

 private:
  std::vector<Stage> branch_;
  Stage shortcut_;
  const core::Tensor* input_ = nullptr;
  core::Tensor dx_, d_skip_;
};

namespace {

// Builds blocks with models::ResNet's names, so the GPU layers find their slots in its layout.
struct GpuBuilder {
  GpuContext& context;
  DeviceParameters& params;
  bool batch_norm;

  GpuResNet::Block::Stage stage(const std::string& conv, const std::string& bn, int in, int out, int kernel, int stride,
                                int pad, bool relu) {
    GpuResNet::Block::Stage s;
    s.conv = std::make_unique<GpuConv2d>(context, params, conv, in, out, kernel, stride, pad);
    if (batch_norm || relu) s.norm = std::make_unique<GpuNormAct>(context, params, batch_norm ? bn : "", out, relu);
    return s;
  }
};

}  // namespace

GpuResNet::GpuResNet(const ResNetConfig& config, GpuContext& context)
    : context_(context), host_(config), device_params_(host_.parameters(), context) {
  core::DeviceGuard on(context.device());
  bool bottleneck = false;
  const std::vector<int> stages = resnet_stage_blocks(config, &bottleneck);
  GpuBuilder build{context, device_params_, config.batch_norm};
  const int w = config.width;
  auto stem = config.small_input ? build.stage("conv1", "bn1", config.in_channels, w, 3, 1, 1, true)
                                 : build.stage("conv1", "bn1", config.in_channels, w, 7, 2, 3, true);
  stem_conv_ = std::move(stem.conv);
  stem_norm_ = std::move(stem.norm);
  if (!config.small_input) stem_pool_ = std::make_unique<GpuMaxPool2d>(context, 3, 2, 1);
  int in = w;
  for (size_t s = 0; s < stages.size(); ++s) {
    const int planes = w << s;
    const int out = planes * (bottleneck ? 4 : 1);
    for (int b = 0; b < stages[s]; ++b) {
      const int stride = (s > 0 && b == 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
      std::vector<Block::Stage> branch;
      if (bottleneck) {
        branch.push_back(build.stage(name + ".conv1", name + ".bn1", in, planes, 1, 1, 0, true));
        branch.push_back(build.stage(name + ".conv2", name + ".bn2", planes, planes, 3, stride, 1, true));
        branch.push_back(build.stage(name + ".conv3", name + ".bn3", planes, out, 1, 1, 0, true));
      } else {
        branch.push_back(build.stage(name + ".conv1", name + ".bn1", in, planes, 3, stride, 1, true));
        branch.push_back(build.stage(name + ".conv2", name + ".bn2", planes, planes, 3, 1, 1, true));
      }
      Block::Stage shortcut;
      if (stride != 1 || in != out) {
        shortcut = build.stage(name + ".downsample.0", name + ".downsample.1", in, out, 1, stride, 0, false);
      }
      blocks_.push_back(std::make_unique<Block>(std::move(branch), std::move(shortcut)));
      in = out;
    }
  }
  pool_ = std::make_unique<GpuGlobalAvgPool>(context);
  fc_ = std::make_unique<GpuLinear>(context, device_params_, "fc", in, config.num_classes);
  device_params_.upload();
}

GpuResNet::~GpuResNet() = default;

const core::Tensor& GpuResNet::forward(const core::Tensor& x, bool training) {
  DTRAIN_CHECK(x.kind() == core::MemoryKind::kDevice && x.dtype() == context_.activation_dtype())
      << "the GPU ResNet takes a device tensor of " << core::dtype_name(context_.activation_dtype());
  const core::Tensor* h = &stem_norm_->forward(stem_conv_->forward(x), nullptr, training);
  if (stem_pool_) h = &stem_pool_->forward(*h);
  for (auto& block : blocks_) h = &block->forward(*h, training);
  return fc_->forward(pool_->forward(*h));
}

const core::Tensor& GpuResNet::backward(const core::Tensor& dlogits) {
  const core::Tensor* d = &pool_->backward(fc_->backward(dlogits));
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) d = &(*it)->backward(*d, context_.activation_dtype());
  if (stem_pool_) d = &stem_pool_->backward(*d);
  stem_conv_->backward_weights(stem_norm_->backward(*d, nullptr));
  return no_input_gradient_;
}

void GpuResNet::initialize(ParameterSet& params, std::mt19937_64& rng) {
  host_.initialize(params, rng);
  device_params_.upload();
}

}  // namespace dtrain::models::cuda
