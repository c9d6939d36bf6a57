#pragma once
// What the CUDA graph tests (one GPU, and over NCCL) share: the small bf16 ResNet step both train,
// what a few training steps did (the parameters before and after, each step's loss, the graph
// replays), and how far two such runs differ (a replayed run against the eager one).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "train/engine/cuda/gpu_train_step.h"

namespace dtrain::train {

constexpr int kBatch = 8, kSide = 16, kSteps = 12, kClasses = 10;

// A small bf16 NHWC ResNet (BN, residual adds, max pool) at batch kBatch of kSide x kSide images.
inline cuda::GpuStepOptions graph_test_step_options(bool graphs) {
  cuda::GpuStepOptions o;
  o.model.blocks_per_stage = {1, 1};
  o.model.bottleneck = false;
  o.model.width = 8;
  o.model.small_input = true;
  o.model.num_classes = kClasses;
  o.model.in_channels = 3;
  o.model.seed = 5;
  o.numerics = models::cuda::ConvNumerics::kBf16Nhwc;
  o.height = o.width = kSide;
  o.sgd = SgdOptions{0.9, 1e-4, false};
  o.batch = kBatch;
  o.cuda_graphs = graphs;
  return o;
}

struct StepTrajectory {
  std::vector<float> initial, losses, params;
  long replays = 0;
  std::string report;
};

// The norm of the difference of two runs' updates over the norm of b's update.
inline double update_difference(const StepTrajectory& a, const StepTrajectory& b) {
  double difference = 0, moved = 0;
  for (size_t i = 0; i < a.params.size(); ++i) {
    difference += (double(a.params[i]) - b.params[i]) * (double(a.params[i]) - b.params[i]);
    moved += (double(b.params[i]) - b.initial[i]) * (double(b.params[i]) - b.initial[i]);
  }
  return std::sqrt(difference / moved);
}

// The worst relative difference of a step's loss.
inline double loss_difference(const StepTrajectory& a, const StepTrajectory& b) {
  double worst = 0;
  for (size_t i = 0; i < a.losses.size(); ++i) {
    worst = std::max(worst, std::fabs(double(a.losses[i]) - b.losses[i]) / std::fabs(double(b.losses[i])));
  }
  return worst;
}

// A replayed run against the eager one, beside the difference of two eager runs (the noise of
// atomics and of cuDNN's plans). The bounds: the larger of a floor and 4x that noise.
struct GraphsAgainstEager {
  double noise_update = 0, noise_loss = 0, update = 0, loss = 0;
  double update_bound() const { return std::max(0.01, 4 * noise_update); }
  double loss_bound() const { return std::max(2e-3, 4 * noise_loss); }
};

inline GraphsAgainstEager compare_to_eager(const StepTrajectory& graphed, const StepTrajectory& eager,
                                           const StepTrajectory& again) {
  return {update_difference(again, eager), loss_difference(again, eager), update_difference(graphed, eager),
          loss_difference(graphed, eager)};
}

}  // namespace dtrain::train
