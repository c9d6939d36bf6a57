// When a step ends with a checkpoint (train/checkpoint/checkpoint_policy.h).
#include "train/checkpoint/checkpoint_policy.h"

#include <gtest/gtest.h>

#include "train/config/train_config.h"

namespace dtrain::train {
namespace {

TEST(CheckpointPolicy, PeriodicLastAndStopOnlyWithADirectory) {
  TrainConfig c = default_train_config();
  c.set_checkpoint_every_steps(0);
  EXPECT_FALSE(checkpoint_due(c, 7, true, true)) << "no checkpoint_dir: never";
  c.set_checkpoint_dir("/tmp/ckpt");
  EXPECT_FALSE(checkpoint_due(c, 7, false, false));
  EXPECT_TRUE(checkpoint_due(c, 7, true, false)) << "the last step of an epoch or of the run";
  EXPECT_TRUE(checkpoint_due(c, 7, false, true)) << "a stop signal";
  c.set_checkpoint_every_steps(5);
  EXPECT_TRUE(checkpoint_due(c, 10, false, false));
  EXPECT_FALSE(checkpoint_due(c, 11, false, false));
}

}  // namespace
}  // namespace dtrain::train
