#pragma once
// A TrainConfig small enough for multi-rank tests to train in milliseconds: a two-stage small
// ResNet of basic blocks on 12x12 synthetic images, one validation batch, no step logging.
#include "train/config/train_config.h"

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

// A BN-free network (so N ranks x batch b equals 1 rank x N b exactly in fp32) for rank-equivalence
// tests: 5 steps of plain SGD.
inline TrainConfig small_bn_free_config(int batch_per_rank) {
  TrainConfig c = tiny_synthetic_config();
  c.set_width(8);
  c.set_no_batch_norm(true);
  c.set_synthetic_samples(600);
  c.set_batch_per_rank(batch_per_rank);
  c.set_epochs(1);
  c.set_max_steps_per_epoch(5);
  c.set_base_lr(0.05);
  c.set_warmup_epochs(0);
  c.set_weight_decay(1e-4);
  c.set_seed(3);
  return c;
}

}  // namespace dtrain::train
