#pragma once
// A TrainConfig resolved once: the fields that name a choice (model, dataset, device, precision,
// backend, lr_decay, gradient_wire_dtype) parsed into types and every combination checked, here
// only. Nothing else compares those strings; the Trainer and the step engines take this.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "comm/backends/factory.h"
#include "models/resnet_plan.h"
#include "runtime/memory/dtype.h"
#include "train/config/train_config.h"
#include "train/engine/lr_schedule.h"

namespace dtrain::train {

enum class ModelKind { kResNet, kSmallResNet };
enum class DatasetKind { kSynthetic, kFashionMnist, kImageNet };
enum class DeviceChoice { kAuto, kCpu, kGpu };
enum class Precision { kBf16, kFp32 };  // on GPUs: bf16 NHWC (fast), fp32 NCHW (reference)
enum class JpegDecoder { kCpu, kGpu };

struct ResolvedConfig {
  TrainConfig fields;  // every field as given: checkpoints store it, a resume compares it
  ModelKind model = ModelKind::kResNet;
  DatasetKind dataset = DatasetKind::kSynthetic;
  DeviceChoice device = DeviceChoice::kAuto;
  Precision precision = Precision::kBf16;
  JpegDecoder jpeg_decoder = JpegDecoder::kCpu;
  comm::Backend backend = comm::Backend::kAuto;
  DecayKind lr_decay = DecayKind::kStep;
  // What crosses nodes (hierarchical, mpi-ring); nullopt: auto, decided with the layout (comm::choose_wire).
  std::optional<runtime::DType> gradient_wire_dtype;
  std::vector<int> stop_signals;  // parsed stop_signals (stop_signals.h)
  // Where rank 0 writes config.pbtxt and, without checkpoint_dir, the final weights: run_dir, else
  // checkpoint_dir (so a requeued job keeps one directory), else what load_train_config chose
  // (runs/<name>-<time>); empty (a Trainer built by a test): none.
  std::string run_dir;
  bool fresh_run_dir = false;   // run_dir is that default name: the run takes a directory of its own
  float backbone_lr_scale = 1;  // backbone_lr_scale, 1 where unset
  // Which setting gave the stall thresholds (flag, config file, variable or default), for the log.
  std::string stall_source;
};

// Images one rank trains on per optimizer step: batch_per_rank x accumulation_steps (a stored
// config from before accumulation_steps existed is completed by read_checkpoint).
inline long images_per_rank_per_step(const TrainConfig& c) {
  return static_cast<long>(c.batch_per_rank()) * c.accumulation_steps();
}

// UsageError naming the field: an unknown choice, an impossible combination, or a size or number
// out of range (config_limits.h), all before anything is allocated or started.
ResolvedConfig resolve(const TrainConfig& config);

// The network a config describes for a dataset of `num_classes` classes and `in_channels` input
// channels (the Trainer, and tools that rebuild a checkpoint's model, use this one translation).
models::ResNetConfig resnet_config(const ResolvedConfig& config, int num_classes, int in_channels);

}  // namespace dtrain::train
