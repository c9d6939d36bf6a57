#include "train/observe/step_timer.h"

#include <algorithm>

#include "runtime/base/steady_seconds.h"
#include "train/observe/progress.h"

namespace dtrain::train {

StepTimer::StepTimer(std::function<double()> now) : now_(std::move(now)) {
  if (!now_) {
    now_ = runtime::steady_seconds;
  }
  start_ = interval_start_ = step_start_ = wait_start_ = now_();
}

void StepTimer::begin_step() {
  step_start_ = wait_start_ = now_();
}

void StepTimer::begin_wait() {
  wait_start_ = now_();
}

double StepTimer::batch_arrived() {
  const double waited = now_() - wait_start_;
  if (!waits_on_device_) {
    interval_wait_ += waited;
    epoch_wait_ += waited;
  }
  return waited;
}

void StepTimer::add_device_wait(double seconds) {
  interval_wait_ += seconds;
  epoch_wait_ += seconds;
}

void StepTimer::end_step() {
  step_seconds_.push_back(now_() - step_start_);
}

StepTimer::Interval StepTimer::take_interval() {
  const double now = now_();
  Interval interval;
  interval.seconds = now - interval_start_;
  interval.wait_fraction = interval.seconds > 0 ? interval_wait_ / interval.seconds : 0;
  interval_start_ = now;
  interval_wait_ = 0;
  return interval;
}

double StepTimer::eta(long steps_left) const {
  return eta_seconds(elapsed(), steps(), steps_left);
}

double StepTimer::wait_fraction() const {
  const double seconds = elapsed();
  return seconds > 0 ? epoch_wait_ / seconds : 0;
}

double StepTimer::median_step_seconds(long warmup) const {
  const std::vector<double>& steps = device_step_seconds_.empty() ? step_seconds_ : device_step_seconds_;
  const long skip = std::min(warmup, static_cast<long>(steps.size()) / 2);
  std::vector<double> timed(steps.begin() + skip, steps.end());
  if (timed.empty()) return 0;
  std::nth_element(timed.begin(), timed.begin() + static_cast<long>(timed.size() / 2), timed.end());
  return timed[timed.size() / 2];
}

double DeviceWaitPairing::pair(const std::vector<double>& gaps) {
  double total = 0;
  for (const double gap : gaps) {
    if (waits_.empty()) break;
    total += std::min(gap, waits_.front());
    waits_.pop_front();
  }
  return total;
}

}  // namespace dtrain::train
