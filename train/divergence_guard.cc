#include "train/divergence_guard.h"

#include <cmath>
#include <sstream>

#include "runtime/base/error.h"
#include "runtime/base/log.h"

namespace dtrain::train {

void DivergenceGuard::check(const std::vector<double>& losses, const StepPosition& at) {
  std::ostringstream bad;
  int bad_ranks = 0;
  for (size_t r = 0; r < losses.size(); ++r) {
    if (!std::isfinite(losses[r])) bad << (bad_ranks++ ? ", " : "") << r << " (" << losses[r] << ")";
  }
  if (bad_ranks == 0) {
    streak_ = 0;
    return;
  }
  ++streak_;
  if (!reports_) return;
  if (streak_ > allowed_) {
    DTRAIN_FAIL() << "training diverged: non-finite loss at step " << at.global_step << " (epoch " << at.epoch
                  << ", step " << at.step + 1 << " of " << at.steps << ") on rank(s) " << bad.str() << "; " << streak_
                  << " check(s) in a row, more than max_nonfinite_steps " << allowed_
                  << " tolerates (lower base_lr, or raise max_nonfinite_steps)";
  }
  DTRAIN_LOG(kWarn) << "non-finite loss at step " << at.global_step << " (epoch " << at.epoch << ", step "
                    << at.step + 1 << " of " << at.steps << ") on rank(s) " << bad.str() << ": " << streak_
                    << " in a row, " << allowed_ << " tolerated (max_nonfinite_steps)";
}

}  // namespace dtrain::train
