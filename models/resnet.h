#pragma once
// The ResNet family on the CPU: the layers of resnet_plan.h as Modules over the CPU kernels. All
// parameters in one ParameterSet (flat, backward order), initialized from the plan.
#include <memory>
#include <vector>

#include "models/layers.h"
#include "models/resnet_plan.h"

namespace dtrain::models {

class ResNet final : public Module {
 public:
  explicit ResNet(const ResNetConfig& config);

  const runtime::Tensor& forward(const runtime::Tensor& x, bool training) override;
  const runtime::Tensor& backward(const runtime::Tensor& dy) override;
  void initialize(ParameterSet& params, std::mt19937_64& rng) override;

  ParameterSet& parameters() { return params_; }
  const ResNetConfig& config() const { return config_; }
  const ResNetPlan& plan() const { return plan_; }
  // Every BN layer synchronizes through `reducer` (batch_stats_reducer.h); null: none does.
  void set_batch_stats_reducer(BatchStatsReducer* reducer);

 private:
  ResNetConfig config_;
  ResNetPlan plan_;
  ParameterSet params_;  // declared before the layers, which register into it
  std::unique_ptr<Sequential> body_;
  std::vector<BatchNorm2d*> norms_;  // owned by body_
};

}  // namespace dtrain::models
