#pragma once
// The ResNet family (He et al.), as torchvision builds it:
//   ResNet-18/34 from basic blocks, ResNet-50/101/152 from bottlenecks; ResNet-50 is v1.5 (the
//   stride-2 sits on the 3x3 convolution). ImageNet stem (7x7/2 conv, BN, ReLU, 3x3/2 max pool)
//   or the small-input stem for 28x28 / 32x32 images (3x3/1 conv, no max pool). Kaiming-normal
//   convolutions, optional zero-initialized last BN gamma of every residual branch, deterministic
//   for a given seed. All parameters in one ParameterSet (flat, backward order).
#include <cstdint>
#include <memory>
#include <vector>

#include "models/layers.h"

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

class ResNet final : public Module {
 public:
  explicit ResNet(const ResNetConfig& config);

  const core::Tensor& forward(const core::Tensor& x, bool training) override;
  const core::Tensor& backward(const core::Tensor& dy) override;
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;

  ParameterSet& parameters() { return params_; }
  const ResNetConfig& config() const { return config_; }

 private:
  ResNetConfig config_;
  ParameterSet params_;  // declared before the layers, which register into it
  std::unique_ptr<Sequential> body_;
};

// Blocks per stage for the config's depth (or its custom stages); sets *bottleneck to the block type.
std::vector<int> resnet_stage_blocks(const ResNetConfig& config, bool* bottleneck);

// UsageError for an unsupported depth or a bad shape.
void validate(const ResNetConfig& config);

}  // namespace dtrain::models
