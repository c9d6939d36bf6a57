#include "models/resnet_plan.h"

#include <random>

#include "models/layers.h"
#include "runtime/base/error.h"

namespace dtrain::models {
namespace {

// Blocks per stage for the config's depth (or its custom stages); sets *bottleneck to the block type.
std::vector<int> stage_blocks(const ResNetConfig& c, bool* bottleneck) {
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

// The layers in build order: the stem, then per block its shortcut before its branch. Declaring
// and initializing both walk this, so the layout and the random draws follow one order.
template <typename OnConvNorm>
void for_each_conv_norm(const ResNetPlan& plan, OnConvNorm&& on) {
  on(plan.stem);
  for (const ResidualBlockSpec& block : plan.blocks) {
    if (block.shortcut) on(*block.shortcut);
    for (const ConvNormSpec& stage : block.branch) on(stage);
  }
}

}  // namespace

void validate(const ResNetConfig& c) {
  bool bottleneck = false;
  const std::vector<int> blocks = stage_blocks(c, &bottleneck);
  DTRAIN_USAGE_CHECK(!blocks.empty() && blocks.size() <= 4) << "a ResNet has 1 to 4 stages";
  for (int b : blocks) DTRAIN_USAGE_CHECK(b > 0) << "every ResNet stage needs at least one block";
  DTRAIN_USAGE_CHECK(c.num_classes > 0 && c.in_channels > 0 && c.width > 0)
      << "ResNet classes, input channels and width must be positive";
}

ResNetPlan resnet_plan(const ResNetConfig& c) {
  validate(c);
  bool bottleneck = false;
  const std::vector<int> stages = stage_blocks(c, &bottleneck);
  auto conv_norm = [&](const std::string& conv, const std::string& norm, int in, int out, int kernel, int stride,
                       int pad, bool relu) {
    return ConvNormSpec{conv, c.batch_norm ? norm : "", in, out, kernel, stride, pad, relu, false};
  };
  ResNetPlan plan;
  plan.seed = c.seed;
  plan.num_classes = c.num_classes;
  const int w = c.width;
  plan.stem = c.small_input ? conv_norm("conv1", "bn1", c.in_channels, w, 3, 1, 1, true)
                            : conv_norm("conv1", "bn1", c.in_channels, w, 7, 2, 3, true);
  plan.stem_max_pool = !c.small_input;
  int in = w;
  for (size_t s = 0; s < stages.size(); ++s) {
    const int planes = w << s;
    const int out = planes * (bottleneck ? 4 : 1);
    for (int b = 0; b < stages[s]; ++b) {
      const int stride = (s > 0 && b == 0) ? 2 : 1;
      ResidualBlockSpec block;
      block.name = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
      const std::string& n = block.name;
      if (bottleneck) {
        block.branch.push_back(conv_norm(n + ".conv1", n + ".bn1", in, planes, 1, 1, 0, true));
        // v1.5: the stride sits on the 3x3.
        block.branch.push_back(conv_norm(n + ".conv2", n + ".bn2", planes, planes, 3, stride, 1, true));
        block.branch.push_back(conv_norm(n + ".conv3", n + ".bn3", planes, out, 1, 1, 0, true));
      } else {
        block.branch.push_back(conv_norm(n + ".conv1", n + ".bn1", in, planes, 3, stride, 1, true));
        block.branch.push_back(conv_norm(n + ".conv2", n + ".bn2", planes, planes, 3, 1, 1, true));
      }
      block.branch.back().zero_gamma = c.zero_init_residual && c.batch_norm;
      if (stride != 1 || in != out) {
        block.shortcut = conv_norm(n + ".downsample.0", n + ".downsample.1", in, out, 1, stride, 0, false);
      }
      plan.blocks.push_back(std::move(block));
      in = out;
    }
  }
  plan.features = in;
  return plan;
}

void declare_parameters(const ResNetPlan& plan, ParameterSet& params) {
  for_each_conv_norm(plan, [&](const ConvNormSpec& s) {
    Conv2d::declare(params, s.conv, s.in_channels, s.out_channels, s.kernel);
    if (!s.norm.empty()) BatchNorm2d::declare(params, s.norm, s.out_channels);
  });
  Linear::declare(params, plan.classifier, plan.features, plan.num_classes);
  params.finalize();
}

void initialize_parameters(const ResNetPlan& plan, ParameterSet& params, std::mt19937_64& rng) {
  for_each_conv_norm(plan, [&](const ConvNormSpec& s) {
    Conv2d::initialize_weight(params, params.find(s.conv + ".weight"), rng);
    if (!s.norm.empty()) BatchNorm2d::initialize_slots(params, BatchNorm2d::find(params, s.norm), s.zero_gamma);
  });
  Linear::initialize_slots(params, Linear::find(params, plan.classifier), rng);
}

void initialize_parameters(const ResNetPlan& plan, ParameterSet& params) {
  std::mt19937_64 rng(plan.seed);
  initialize_parameters(plan, params, rng);
}

}  // namespace dtrain::models
