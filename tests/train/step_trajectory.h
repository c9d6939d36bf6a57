#pragma once
// What a few training steps did (the parameters before and after, each step's loss, the CUDA
// graph replays), and how far two such runs differ: the graph tests compare a replayed run with
// the eager one this way, on one GPU and over NCCL.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace dtrain::train {

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

}  // namespace dtrain::train
