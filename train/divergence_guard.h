#pragma once
// The divergence guard: a run whose loss explodes stops with an error naming the step, instead of
// training on (and checkpointing) garbage. Three signs, each checked at every loss read-back:
//   - a NaN or infinite loss on some rank. One bad step may be a fluke of a batch
//     (max_nonfinite_steps tolerates that many loss checks in a row); past that the run diverged;
//   - the loss (the mean over the ranks) above max_loss, when that bound is set;
//   - growth: the mean of the last `window` checks (of fewer while the run is younger than that)
//     above `factor` times the lowest such mean seen before, and above the first check's loss (a
//     loss trained close to 0 may grow a hundredfold without diverging). A diverging run grows by orders of
//     magnitude within a few checks, long before it overflows to NaN; a single spike after the
//     first window is diluted by the window's other checks and does not trip it (a spike of more
//     than factor x window times the loss would).
#include <deque>
#include <vector>

#include "train/observe/step_observer.h"

namespace dtrain::train {

struct DivergenceLimits {
  int max_nonfinite_steps = 0;
  double factor = 100;  // 0: no growth check
  int window = 10;
  double max_loss = 0;  // 0: no bound
};

class DivergenceGuard {
 public:
  // reports: this rank logs and stops the job (rank 0); the others only count.
  DivergenceGuard(const DivergenceLimits& limits, bool reports) : limits_(limits), reports_(reports) {}

  // On every rank at each loss read-back, with every rank's loss of step `at`. While non-finite
  // losses are tolerated the reporting rank warns; past the limits it throws (the other ranks go on
  // until its abort ends them).
  void check(const std::vector<double>& losses, const StepPosition& at);

 private:
  void check_finite(const std::vector<double>& losses, const StepPosition& at);
  void check_growth(double loss, const StepPosition& at);

  DivergenceLimits limits_;
  bool reports_;
  int streak_ = 0;             // consecutive checks with a non-finite loss on some rank
  std::deque<double> recent_;  // the last `window` finite mean losses
  double recent_sum_ = 0;
  double lowest_mean_ = -1;  // the lowest window mean so far; < 0: none yet
  double first_ = -1;        // the first check's loss; < 0: none yet
};

}  // namespace dtrain::train
