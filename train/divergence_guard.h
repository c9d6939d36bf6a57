#pragma once
// The divergence guard: a loss that turned NaN or infinite stops the job with an error naming the
// step, instead of training on (and checkpointing) garbage. One bad step may be a fluke of a batch
// (max_nonfinite_steps tolerates that many loss checks in a row); past that the run has diverged.
#include <vector>

#include "train/observe/step_observer.h"

namespace dtrain::train {

class DivergenceGuard {
 public:
  // reports: this rank logs and stops the job (rank 0); the others only count.
  DivergenceGuard(int max_nonfinite_steps, bool reports) : allowed_(max_nonfinite_steps), reports_(reports) {}

  // On every rank at each loss read-back, with every rank's loss of step `at`: counts the
  // consecutive checks with a non-finite loss on some rank. While they are tolerated the reporting
  // rank warns; past max_nonfinite_steps it throws (the other ranks go on until its abort ends
  // them).
  void check(const std::vector<double>& losses, const StepPosition& at);

 private:
  int allowed_;
  bool reports_;
  int streak_ = 0;  // consecutive checks with a non-finite loss on some rank
};

}  // namespace dtrain::train
