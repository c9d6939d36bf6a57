#include "models/resnet.h"

#include <string>
#include <vector>

#include "models/cpu/elementwise.h"
#include "runtime/base/error.h"

namespace dtrain::models {
namespace {

// relu(branch(x) + shortcut(x)); the shortcut is the identity or a strided 1x1 conv + BN.
class ResidualBlock final : public Module {
 public:
  ResidualBlock(std::unique_ptr<Sequential> branch, std::unique_ptr<Sequential> shortcut)
      : branch_(std::move(branch)), shortcut_(std::move(shortcut)) {}

  const runtime::Tensor& forward(const runtime::Tensor& x, bool training) override {
    const runtime::Tensor& main = branch_->forward(x, training);
    const runtime::Tensor& skip = shortcut_->empty() ? x : shortcut_->forward(x, training);
    ensure_shape(output_, main.shape());
    DTRAIN_CHECK(skip.shape() == main.shape()) << "residual shapes differ: " << runtime::shape_string(main.shape())
                                               << " vs " << runtime::shape_string(skip.shape());
    cpu::residual_add_forward(main.data<float>(), skip.data<float>(), output_.data<float>(), main.numel());
    cpu::relu_forward(output_.data<float>(), output_.data<float>(), output_.numel());
    return output_;
  }

  const runtime::Tensor& backward(const runtime::Tensor& dy) override {
    ensure_shape(d_sum_, dy.shape());
    cpu::relu_backward(output_.data<float>(), dy.data<float>(), d_sum_.data<float>(), dy.numel());
    // Branch first: its parameters sit before the shortcut's in the backward-ordered flat buffer.
    const runtime::Tensor& d_branch = branch_->backward(d_sum_);
    const runtime::Tensor& d_skip = shortcut_->empty() ? d_sum_ : shortcut_->backward(d_sum_);
    ensure_shape(dx_, d_branch.shape());
    cpu::residual_add_forward(d_branch.data<float>(), d_skip.data<float>(), dx_.data<float>(), dx_.numel());
    return dx_;
  }

  void initialize(ParameterSet& params, std::mt19937_64& rng) override {
    shortcut_->initialize(params, rng);
    branch_->initialize(params, rng);
  }

 private:
  std::unique_ptr<Sequential> branch_;
  std::unique_ptr<Sequential> shortcut_;
  runtime::Tensor output_, d_sum_, dx_;
};

// A convolution and its norm (when the network has one), appended to `seq`; they register their
// parameters in the plan's build order. `norms` collects the BN layers.
void add_conv_norm(Sequential& seq, ParameterSet& params, const ConvNormSpec& s, std::vector<BatchNorm2d*>& norms) {
  seq.add(std::make_unique<Conv2d>(params, s.conv, s.in_channels, s.out_channels, s.kernel, s.stride, s.pad));
  if (s.norm.empty()) return;
  auto norm = std::make_unique<BatchNorm2d>(params, s.norm, s.out_channels);
  norms.push_back(norm.get());
  seq.add(std::move(norm));
}

// Shortcut first, then the branch (the plan's build order); the branch's last ReLU comes after the
// residual sum, in ResidualBlock.
std::unique_ptr<Module> residual_block(ParameterSet& params, const ResidualBlockSpec& spec,
                                       std::vector<BatchNorm2d*>& norms) {
  auto shortcut = std::make_unique<Sequential>();
  if (spec.shortcut) add_conv_norm(*shortcut, params, *spec.shortcut, norms);
  auto branch = std::make_unique<Sequential>();
  for (size_t i = 0; i < spec.branch.size(); ++i) {
    add_conv_norm(*branch, params, spec.branch[i], norms);
    if (i + 1 < spec.branch.size()) branch->add(std::make_unique<ReLU>());
  }
  return std::make_unique<ResidualBlock>(std::move(branch), std::move(shortcut));
}

}  // namespace

ResNet::ResNet(const ResNetConfig& config)
    : config_(config), plan_(resnet_plan(config)), body_(std::make_unique<Sequential>()) {
  add_conv_norm(*body_, params_, plan_.stem, norms_);
  body_->add(std::make_unique<ReLU>());
  if (plan_.stem_max_pool) body_->add(std::make_unique<MaxPool2d>(3, 2, 1));
  for (const ResidualBlockSpec& block : plan_.blocks) body_->add(residual_block(params_, block, norms_));
  body_->add(std::make_unique<GlobalAvgPool>());
  body_->add(std::make_unique<Linear>(params_, plan_.classifier, plan_.features, plan_.num_classes));
  params_.finalize();
  initialize_parameters(plan_, params_);
}

const runtime::Tensor& ResNet::forward(const runtime::Tensor& x, bool training) {
  return body_->forward(x, training);
}

const runtime::Tensor& ResNet::backward(const runtime::Tensor& dy) {
  return body_->backward(dy);
}

void ResNet::set_batch_stats_reducer(BatchStatsReducer* reducer) {
  for (BatchNorm2d* norm : norms_) norm->set_batch_stats_reducer(reducer);
}

void ResNet::initialize(ParameterSet& params, std::mt19937_64& rng) {
  initialize_parameters(plan_, params, rng);
}

}  // namespace dtrain::models
