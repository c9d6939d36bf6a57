#include "train/divergence_guard.h"

#include <cmath>
#include <sstream>

#include "runtime/base/error.h"
#include "runtime/base/log.h"

namespace dtrain::train {
namespace {

std::string where(const StepPosition& at) {
  std::ostringstream text;
  text << "at step " << at.global_step << " (epoch " << at.epoch << ", step " << at.step + 1 << " of " << at.steps
       << ")";
  return text.str();
}

}  // namespace

void DivergenceGuard::check(const std::vector<double>& losses, const StepPosition& at) {
  check_finite(losses, at);
  double sum = 0;
  int finite = 0;
  for (double l : losses) {
    if (!std::isfinite(l)) continue;
    sum += l;
    ++finite;
  }
  if (finite > 0) check_growth(sum / finite, at);
}

void DivergenceGuard::check_finite(const std::vector<double>& losses, const StepPosition& at) {
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
  if (streak_ > limits_.max_nonfinite_steps) {
    DTRAIN_FAIL() << "training diverged: non-finite loss " << where(at) << " on rank(s) " << bad.str() << "; "
                  << streak_ << " check(s) in a row, more than max_nonfinite_steps " << limits_.max_nonfinite_steps
                  << " tolerates (lower base_lr, or raise max_nonfinite_steps)";
  }
  DTRAIN_LOG(kWarn) << "non-finite loss " << where(at) << " on rank(s) " << bad.str() << ": " << streak_
                    << " in a row, " << limits_.max_nonfinite_steps << " tolerated (max_nonfinite_steps)";
}

void DivergenceGuard::check_growth(double loss, const StepPosition& at) {
  if (reports_ && limits_.max_loss > 0 && loss > limits_.max_loss) {
    DTRAIN_FAIL() << "training diverged: loss " << loss << " " << where(at) << " is above max_loss " << limits_.max_loss
                  << " (lower base_lr, or raise max_loss)";
  }
  if (limits_.factor <= 0 || limits_.window <= 0) return;
  recent_.push_back(loss);
  recent_sum_ += loss;
  if (recent_.size() > static_cast<size_t>(limits_.window)) {
    recent_sum_ -= recent_.front();
    recent_.pop_front();
  }
  const double mean = recent_sum_ / static_cast<double>(recent_.size());
  if (first_ < 0) first_ = loss;
  if (reports_ && lowest_mean_ > 0 && mean > limits_.factor * lowest_mean_ && mean > first_) {
    DTRAIN_FAIL() << "training diverged: loss " << loss << " " << where(at) << ": the mean of the last "
                  << recent_.size() << " loss check(s), " << mean << ", is " << mean / lowest_mean_
                  << "x the lowest such mean so far (" << lowest_mean_ << "), more than divergence_factor "
                  << limits_.factor << " (lower base_lr, or raise divergence_factor; 0 turns the check off)";
  }
  if (lowest_mean_ < 0 || mean < lowest_mean_) lowest_mean_ = mean;
}

}  // namespace dtrain::train
