#pragma once
// The ResNet family (He et al.), as torchvision builds it, described once: the ordered layers of a
// config, with their names and geometry. The CPU ResNet (resnet.h) and the GPU ResNet
// (cuda/gpu_resnet.h) are both built by walking a plan, and the parameter layout and the
// initialization come from it too, so the two networks cannot drift apart.
//
//   ResNet-18/34 from basic blocks, ResNet-50/101/152 from bottlenecks; ResNet-50 is v1.5 (the
//   stride-2 sits on the 3x3 convolution). ImageNet stem (7x7/2 conv, BN, ReLU, 3x3/2 max pool)
//   or the small-input stem for 28x28 / 32x32 images (3x3/1 conv, no max pool). Kaiming-normal
//   convolutions, optional zero-initialized last BN gamma of every residual branch, deterministic
//   for a given seed.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "models/parameter_set.h"

namespace dtrain::models {

struct ResNetConfig {
  int depth = 50;                     // 18, 34, 50, 101 or 152; ignored when blocks_per_stage is set
  std::vector<int> blocks_per_stage;  // custom depth, e.g. {1, 1, 1, 1}; bottlenecks when bottleneck
  bool bottleneck = true;             // block type for a custom depth
  int num_classes = 1000;
  int in_channels = 3;
  int width = 64;            // channels of the first stage
  bool small_input = false;  // 3x3 stem, no max pool
  bool zero_init_residual = false;
  bool batch_norm = true;  // false: no BN layers at all (for exact rank-equivalence tests)
  uint64_t seed = 0;
};

// A convolution (no bias) and the batch norm after it. Parameters are named like torchvision's:
// "<conv>.weight", "<norm>.weight", "<norm>.bias", "<norm>.running_mean", "<norm>.running_var".
struct ConvNormSpec {
  std::string conv;
  std::string norm;  // empty: the network has no batch norm
  int in_channels = 0;
  int out_channels = 0;
  int kernel = 1;
  int stride = 1;
  int pad = 0;
  bool relu = true;         // a ReLU after the norm (in a branch's last stage: after the residual sum)
  bool zero_gamma = false;  // the norm's gamma starts at 0 (zero_init_residual, last stage of a branch)
};

// relu(branch(x) + shortcut(x)): the shortcut is the identity, or a strided 1x1 conv + norm.
struct ResidualBlockSpec {
  std::string name;  // "layer<stage>.<index>"
  std::vector<ConvNormSpec> branch;
  std::optional<ConvNormSpec> shortcut;
};

// The classifier's layer name in every plan (torchvision's, so exported weights keep their names).
inline constexpr char kClassifierName[] = "fc";

struct ResNetPlan {
  ConvNormSpec stem;
  bool stem_max_pool = true;  // 3x3, stride 2, pad 1
  std::vector<ResidualBlockSpec> blocks;
  std::string classifier = kClassifierName;  // global average pool, then this linear layer
  int features = 0;                          // the classifier's inputs
  int num_classes = 0;
  uint64_t seed = 0;
};

// UsageError for an unsupported depth or a bad shape.
void validate(const ResNetConfig& config);
ResNetPlan resnet_plan(const ResNetConfig& config);

// Registers the plan's parameters and state in build order (stem, then per block the shortcut
// before the branch, then the classifier: reversed, the branch's gradients precede the
// shortcut's, which is the order backward produces them) and fixes the layout.
void declare_parameters(const ResNetPlan& plan, ParameterSet& params);
// The plan's initial values from `rng`, the same draws in the same order for every network built
// from the plan: CPU and GPU replicas of one seed start identical.
void initialize_parameters(const ResNetPlan& plan, ParameterSet& params, std::mt19937_64& rng);
// The same from a generator seeded with plan.seed.
void initialize_parameters(const ResNetPlan& plan, ParameterSet& params);

}  // namespace dtrain::models
