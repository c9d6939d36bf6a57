#pragma once
// Where one rank's training steps run: the CPU reference path or the rank's GPU. The Trainer owns
// data, schedule, logging, evaluation counting and checkpoints; an engine owns the model replica,
// the gradient averaging over the ranks and the optimizer state, and keeps a host mirror of them
// (parameters, BN state, momentum) for checkpoints.
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "models/batch_stats_reducer.h"
#include "models/parameter_set.h"
#include "models/resnet_plan.h"
#include "runtime/rank/rank_context.h"
#include "train/config/resolved_config.h"
#include "train/data/data_loader.h"
#include "train/engine/gradient_accumulation.h"
#include "train/observe/step_profile.h"
#include "train/observe/step_timer.h"
#include "train/observe/timeline_events.h"

namespace dtrain::train {

struct EngineSetup {
  ResolvedConfig config;
  models::ResNetConfig model;
  ImageShape image;
  float mean[3] = {0, 0, 0};
  float std[3] = {1, 1, 1};
};

// Validation totals of this rank, summed over the batches of one evaluation.
struct EvalTotals {
  double loss_sum = 0;  // sum of per-image losses
  long top1 = 0, top5 = 0, images = 0;
};

// The device memory of an engine's caching allocator, for the progress line: the peaks since the
// process started of what is in use and of what the allocator holds from the device (in use plus
// cached). Zero on the CPU path, which reports none.
struct DeviceMemory {
  double peak_bytes = 0;
  double reserved_bytes = 0;
};

class StepEngine {
 public:
  virtual ~StepEngine() = default;
  virtual std::string describe() const = 0;  // "cpu", "GPU 0 (NVIDIA H200), bf16 NHWC", ...

  // One micro-batch of a training step on a loader batch (uint8 NHWC): forward and backward, its
  // gradients folded into the step's (gradient_accumulation.h); on the step's last micro-batch the
  // gradient all-reduce (during backward) and the SGD update at `lr`, which the others ignore. The
  // micro-batches before the last run no collective. micro {0, 1}: a plain step. The engine may go
  // on reading the batch's memory after returning (the GPU engine copies it asynchronously); it
  // hands the batch back through finished_batches(). At most max_batches_held() batches are held
  // at once: a step that would hold more first waits for the oldest copy (the GPU is then behind,
  // not the host).
  virtual void train_step(const Batch& batch, float lr, const MicroBatch& micro) = 0;
  // The batches (of train_step and evaluate) whose memory the engine no longer reads, oldest
  // first. wait_all: waits until that is every batch it holds.
  virtual std::vector<const Batch*> finished_batches(bool wait_all) = 0;
  virtual int max_batches_held() const = 0;
  // This rank's loss of the latest optimizer step (the mean over its micro-batches). The GPU engine waits for that
  // step, so the Trainer reads it only where it reports it unless loss_is_free().
  virtual double last_loss() = 0;
  virtual bool loss_is_free() const = 0;

  // Evaluation mode: loss, top-1 and top-5 counted where the logits are (on the GPU for the GPU
  // engine), read back once at the end. A non-finite logit never counts as a hit.
  virtual void begin_evaluation() = 0;
  virtual void evaluate(const Batch& batch) = 0;
  virtual EvalTotals end_evaluation() = 0;

  // The host mirror. sync_to_host() refreshes it (before a checkpoint); load_from_host() makes the
  // replica take its values (after a resume wrote them).
  virtual models::ParameterSet& parameters() = 0;
  virtual std::vector<float>& momentum() = 0;
  virtual void sync_to_host() = 0;
  virtual void load_from_host() = 0;
  // The gradient synchronizer's bucket count; 0 where one rank has nothing to average.
  virtual size_t gradient_buckets() const = 0;
  // Fine-tuning: the parameters outside the classifier update at `scale` x the lr from the next
  // step on; 0 freezes them (no update, no momentum; BN running statistics still follow the data).
  virtual void set_backbone_lr_scale(float scale) = 0;
  virtual DeviceMemory device_memory() const { return {}; }
  // Whether train_step decodes the JPEGs a loader left to the device (LoaderOptions::defer_decoding),
  // and a line saying how many it decoded where (empty when it does not).
  virtual bool decodes_jpeg() const { return false; }
  virtual std::string jpeg_report() const { return {}; }
  // Whether steps run on a device the host runs ahead of (the GPU engine): then the data-wait
  // figure and the epoch's median step are built from take_device_times(); on the host (the CPU
  // engine) the host's wait for a batch and the host's step are the step's.
  virtual bool waits_on_device() const { return false; }
  // The device's times of each train_step since the last call (its idle gap before it, and its
  // start since the previous one's), oldest first, for those the device has started (wait_all:
  // every one queued); the first train_step of the engine had nothing before it: infinity. Empty
  // where waits_on_device() is false.
  virtual std::vector<DeviceMicroBatchTime> take_device_times(bool /*wait_all*/) { return {}; }

  // The timeline (timeline.h): the next train_step adds its phases to `recorder` as global step
  // `step` (forward, backward, the gradient buckets' all-reduces, the SGD update; the GPU engine
  // also the H2D copy); nullptr, as for every step outside the range: it records nothing. The CPU
  // engine adds host times as it goes. The GPU engine records timing events on its streams and
  // adds the spans only at flush_timeline(), which waits once for the latest recorded step.
  virtual void trace_next_step(TimelineRecorder* recorder, long step) = 0;
  virtual void flush_timeline() {}

  // The profile (step_profile.h): the next optimizer step's last micro-batch writes its forward,
  // backward and optimizer times and each gradient range's ready time into `out` before its
  // train_step returns (the GPU engine waits for that step to read its events); nullptr: none.
  virtual void profile_next_step(StepPhases* out) = 0;
};

// Top-1 and top-5 of one row of logits: the classes scoring strictly above the label's logit
// (ties go to the label, as a stable sort would place it). A row with a non-finite logit is a miss
// (a diverged model must not look perfect).
inline void count_hits(const float* logits, int classes, int label, long* top1, long* top5) {
  const float target = logits[label];
  int better = 0;
  bool finite = true;
  for (int j = 0; j < classes; ++j) {
    better += logits[j] > target ? 1 : 0;
    finite = finite && logits[j] - logits[j] == 0.0f;  // false for NaN and infinities
  }
  if (!finite) return;
  *top1 += better == 0;
  *top5 += better < 5;
}

// Collective over ctx.world(): builds the replica and makes every rank start from rank 0's values.
std::unique_ptr<StepEngine> make_cpu_step_engine(const EngineSetup& setup, const runtime::RankContext& ctx);
// The same over the caller's communicator (a test's, counting the collectives); collective over it.
// `bn_group`: the BN group of synchronized BN (batch_norm_group.h), of bn_sync_group ranks; null
// for bn_sync_group 1.
std::unique_ptr<StepEngine> make_cpu_step_engine(const EngineSetup& setup, std::unique_ptr<comm::Communicator> comm,
                                                 std::unique_ptr<models::BatchStatsReducer> bn_group = nullptr);
// `gpu`: this rank's device. A UsageError in builds without CUDA.
std::unique_ptr<StepEngine> make_gpu_step_engine(const EngineSetup& setup, const runtime::RankContext& ctx, int gpu);

}  // namespace dtrain::train
