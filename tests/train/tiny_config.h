#pragma once
// A TrainConfig small enough for multi-rank tests to train in milliseconds: a two-stage small
// ResNet of basic blocks on 12x12 synthetic images, one validation batch, no step logging.
#include "runtime/train/train_config.h"

namespace dtrain::train {

inline TrainConfig tiny_synthetic_config() {
  TrainConfig c = default_train_config();
  c.set_model("small-resnet");
  c.clear_blocks_per_stage();
  c.add_blocks_per_stage(1);
  c.add_blocks_per_stage(1);
  c.set_bottleneck(false);
  c.set_dataset("synthetic");
  c.set_image_size(12);
  c.set_max_validation_batches(1);
  c.set_log_every_steps(0);
  return c;
}

}  // namespace dtrain::train
