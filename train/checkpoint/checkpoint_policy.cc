#include "train/checkpoint/checkpoint_policy.h"

namespace dtrain::train {

bool checkpoint_due(const TrainConfig& config, long global_step, bool last_step, bool stopping) {
  if (config.checkpoint_dir().empty()) return false;
  const long every = config.checkpoint_every_steps();
  return (every > 0 && global_step % every == 0) || last_step || stopping;
}

}  // namespace dtrain::train
