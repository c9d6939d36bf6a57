#include "models/resnet.h"

#include <string>

#include "models/cpu/elementwise.h"
#include "runtime/core/error.h"

namespace dtrain::models {
namespace {

// relu(branch(x) + shortcut(x)); the shortcut is the identity or a strided 1x1 conv + BN.
class ResidualBlock final : public Module {
 public:
  ResidualBlock(std::unique_ptr<Sequential> branch, std::unique_ptr<Sequential> shortcut, BatchNorm2d* last_bn)
      : branch_(std::move(branch)), shortcut_(std::move(shortcut)), last_bn_(last_bn) {}

  const core::Tensor& forward(const core::Tensor& x, bool training) override {
    const core::Tensor& main = branch_->forward(x, training);
    const core::Tensor& skip = shortcut_->empty() ? x : shortcut_->forward(x, training);
    ensure_shape(output_, main.shape());
    DTRAIN_CHECK(skip.shape() == main.shape())
        << "residual shapes differ: " << core::shape_string(main.shape()) << " vs " << core::shape_string(skip.shape());
    cpu::residual_add_forward(main.data<float>(), skip.data<float>(), output_.data<float>(), main.numel());
    cpu::relu_forward(output_.data<float>(), output_.data<float>(), output_.numel());
    return output_;
  }

  const core::Tensor& backward(const core::Tensor& dy) override {
    ensure_shape(d_sum_, dy.shape());
    cpu::relu_backward(output_.data<float>(), dy.data<float>(), d_sum_.data<float>(), dy.numel());
    // Branch first: its parameters sit before the shortcut's in the backward-ordered flat buffer.
    const core::Tensor& d_branch = branch_->backward(d_sum_);
    const core::Tensor& d_skip = shortcut_->empty() ? d_sum_ : shortcut_->backward(d_sum_);
    ensure_shape(dx_, d_branch.shape());
    cpu::residual_add_forward(d_branch.data<float>(), d_skip.data<float>(), dx_.data<float>(), dx_.numel());
    return dx_;
  }

  void initialize(ParameterSet& params, std::mt19937_64& rng) override {
    shortcut_->initialize(params, rng);
    branch_->initialize(params, rng);
  }

  BatchNorm2d* last_bn() { return last_bn_; }

 private:
  std::unique_ptr<Sequential> branch_;
  std::unique_ptr<Sequential> shortcut_;
  BatchNorm2d* last_bn_;
  core::Tensor output_, d_sum_, dx_;
};

struct Builder {
  ParameterSet& params;
  bool zero_init_residual;
  bool batch_norm;

  // A BN layer, or nothing when the network is built without batch norm.
  BatchNorm2d* norm(Sequential& seq, const std::string& name, int channels) {
    return batch_norm ? add<BatchNorm2d>(seq, params, name, channels) : nullptr;
  }

  template <typename M, typename... Args>
  M* add(Sequential& seq, Args&&... args) {
    auto module = std::make_unique<M>(std::forward<Args>(args)...);
    M* raw = module.get();
    seq.add(std::move(module));
    return raw;
  }

  // Registration order: shortcut first, then the branch, so that (reversed) the branch's
  // parameters precede the shortcut's, matching the order backward produces their gradients.
  std::unique_ptr<Module> block(const std::string& name, int in, int planes, int stride, bool bottleneck) {
    const int expansion = bottleneck ? 4 : 1;
    const int out = planes * expansion;
    auto shortcut = std::make_unique<Sequential>();
    if (stride != 1 || in != out) {
      add<Conv2d>(*shortcut, params, name + ".downsample.0", in, out, 1, stride, 0);
      norm(*shortcut, name + ".downsample.1", out);
    }
    auto branch = std::make_unique<Sequential>();
    BatchNorm2d* last = nullptr;
    if (bottleneck) {
      add<Conv2d>(*branch, params, name + ".conv1", in, planes, 1, 1, 0);
      norm(*branch, name + ".bn1", planes);
      add<ReLU>(*branch);
      add<Conv2d>(*branch, params, name + ".conv2", planes, planes, 3, stride, 1);  // v1.5: stride on the 3x3
      norm(*branch, name + ".bn2", planes);
      add<ReLU>(*branch);
      add<Conv2d>(*branch, params, name + ".conv3", planes, out, 1, 1, 0);
      last = norm(*branch, name + ".bn3", out);
    } else {
      add<Conv2d>(*branch, params, name + ".conv1", in, planes, 3, stride, 1);
      norm(*branch, name + ".bn1", planes);
      add<ReLU>(*branch);
      add<Conv2d>(*branch, params, name + ".conv2", planes, planes, 3, 1, 1);
      last = norm(*branch, name + ".bn2", planes);
    }
    if (zero_init_residual && last != nullptr) last->zero_gamma();
    return std::make_unique<ResidualBlock>(std::move(branch), std::move(shortcut), last);
  }
};

}  // namespace

std::vector<int> resnet_stage_blocks(const ResNetConfig& c, bool* bottleneck) {
  if (!c.blocks_per_stage.empty()) {
    *bottleneck = c.bottleneck;
    return c.blocks_per_stage;
  }
  switch (c.depth) {
    case 18: *bottleneck = false; return {2, 2, 2, 2};
    case 34: *bottleneck = false; return {3, 4, 6, 3};
    case 50: *bottleneck = true; return {3, 4, 6, 3};
    case 101: *bottleneck = true; return {3, 4, 23, 3};
    case 152: *bottleneck = true; return {3, 8, 36, 3};
    default: DTRAIN_USAGE_FAIL() << "ResNet depth " << c.depth << " is not one of 18, 34, 50, 101, 152";
  }
}

void validate(const ResNetConfig& c) {
  bool bottleneck = false;
  const std::vector<int> blocks = resnet_stage_blocks(c, &bottleneck);
  DTRAIN_USAGE_CHECK(!blocks.empty() && blocks.size() <= 4) << "a ResNet has 1 to 4 stages";
  for (int b : blocks) DTRAIN_USAGE_CHECK(b > 0) << "every ResNet stage needs at least one block";
  DTRAIN_USAGE_CHECK(c.num_classes > 0 && c.in_channels > 0 && c.width > 0)
      << "ResNet classes, input channels and width must be positive";
}

ResNet::ResNet(const ResNetConfig& config) : config_(config), body_(std::make_unique<Sequential>()) {
  validate(config_);
  bool bottleneck = false;
  const std::vector<int> blocks = resnet_stage_blocks(config_, &bottleneck);
  Builder build{params_, config_.zero_init_residual, config_.batch_norm};
  const int w = config_.width;
  if (config_.small_input) {
    build.add<Conv2d>(*body_, params_, "conv1", config_.in_channels, w, 3, 1, 1);
  } else {
    build.add<Conv2d>(*body_, params_, "conv1", config_.in_channels, w, 7, 2, 3);
  }
  build.norm(*body_, "bn1", w);
  build.add<ReLU>(*body_);
  if (!config_.small_input) build.add<MaxPool2d>(*body_, 3, 2, 1);
  int in = w;
  for (size_t stage = 0; stage < blocks.size(); ++stage) {
    const int planes = w << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      const int stride = (stage > 0 && b == 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      body_->add(build.block(name, in, planes, stride, bottleneck));
      in = planes * (bottleneck ? 4 : 1);
    }
  }
  build.add<GlobalAvgPool>(*body_);
  build.add<Linear>(*body_, params_, "fc", in, config_.num_classes);
  params_.finalize();
  std::mt19937_64 rng(config_.seed);
  initialize(params_, rng);
}

const core::Tensor& ResNet::forward(const core::Tensor& x, bool training) {
  return body_->forward(x, training);
}

const core::Tensor& ResNet::backward(const core::Tensor& dy) {
  return body_->backward(dy);
}

void ResNet::initialize(ParameterSet& params, std::mt19937_64& rng) {
  body_->initialize(params, rng);
}

}  // namespace dtrain::models
