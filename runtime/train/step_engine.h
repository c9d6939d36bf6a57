#pragma once
// Where one rank's training steps run: the CPU reference path or the rank's GPU. The Trainer owns
// data, schedule, logging, evaluation counting and checkpoints; an engine owns the model replica,
// the gradient averaging over the ranks and the optimizer state, and keeps a host mirror of them
// (parameters, BN state, momentum) for checkpoints.
#include <memory>
#include <vector>

#include "models/parameter_set.h"
#include "models/resnet.h"
#include "runtime/core/rank_context.h"
#include "runtime/train/data/data_loader.h"
#include "runtime/train/train_config.h"

namespace dtrain::train {

struct EngineSetup {
  TrainConfig config;
  models::ResNetConfig model;
  ImageShape image;
  float mean[3] = {0, 0, 0};
  float std[3] = {1, 1, 1};
};

class StepEngine {
 public:
  virtual ~StepEngine() = default;
  virtual std::string describe() const = 0;  // "cpu", "GPU 0 (NVIDIA H200), bf16 NHWC", ...

  // One training step on a loader batch (uint8 NHWC); returns once `batch` may be reused.
  virtual void train_step(const Batch& batch, float lr) = 0;
  // This rank's loss of the latest step. The GPU engine waits for that step, so the Trainer reads
  // it only where it reports it unless loss_is_free().
  virtual double last_loss() = 0;
  virtual bool loss_is_free() const = 0;
  // Evaluation-mode logits of a batch on the host, [batch.size x classes].
  virtual const std::vector<float>& evaluate(const Batch& batch) = 0;

  // The host mirror. sync_to_host() refreshes it (before a checkpoint); load_from_host() makes the
  // replica take its values (after a resume wrote them).
  virtual models::ParameterSet& parameters() = 0;
  virtual std::vector<float>& momentum() = 0;
  virtual void sync_to_host() = 0;
  virtual void load_from_host() = 0;
  virtual size_t gradient_buckets() const = 0;
};

// Collective over ctx.world(): builds the replica and makes every rank start from rank 0's values.
std::unique_ptr<StepEngine> make_cpu_step_engine(const EngineSetup& setup, const core::RankContext& ctx);
// `gpu`: this rank's device. A UsageError in builds without CUDA.
std::unique_ptr<StepEngine> make_gpu_step_engine(const EngineSetup& setup, const core::RankContext& ctx, int gpu);

}  // namespace dtrain::train
