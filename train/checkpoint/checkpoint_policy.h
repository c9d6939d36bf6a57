#pragma once
// When a training step ends with a checkpoint (with a checkpoint_dir; without one, never):
// every checkpoint_every_steps global steps, at the last step of an epoch or of the run
// (max_total_steps may end it mid-epoch: the steps since the last checkpoint are not lost), and at
// the step where a stop signal ends the run (preemption).
#include "train/config/train_config.h"

namespace dtrain::train {

bool checkpoint_due(const TrainConfig& config, long global_step, bool last_step, bool stopping);

}  // namespace dtrain::train
