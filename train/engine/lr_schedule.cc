#include "train/engine/lr_schedule.h"

#include <cmath>
#include <sstream>

#include "runtime/base/error.h"

namespace dtrain::train {

LinearScalingSchedule::LinearScalingSchedule(const LrScheduleOptions& options, long iterations_per_epoch)
    : options_(options), per_epoch_(iterations_per_epoch) {
  DTRAIN_USAGE_CHECK(options.base_lr > 0) << "base learning rate must be positive, got " << options.base_lr;
  DTRAIN_USAGE_CHECK(options.global_batch > 0) << "global batch must be positive";
  DTRAIN_USAGE_CHECK(iterations_per_epoch > 0) << "an epoch needs at least one iteration";
  DTRAIN_USAGE_CHECK(options.warmup_epochs >= 0) << "warm-up epochs must not be negative";
  DTRAIN_USAGE_CHECK(options.total_epochs > 0) << "total epochs must be positive";
  DTRAIN_USAGE_CHECK(options.warmup_start_fraction >= 0 && options.warmup_start_fraction <= 1)
      << "warm-up start fraction outside [0, 1]";
  for (size_t i = 1; i < options.milestones.size(); ++i) {
    DTRAIN_USAGE_CHECK(options.milestones[i] > options.milestones[i - 1]) << "LR milestones must increase";
  }
  peak_ = options.base_lr * options.global_batch / 256.0;
}

double LinearScalingSchedule::lr_at(double iteration) const {
  const double epoch = iteration / static_cast<double>(per_epoch_);
  if (epoch < options_.warmup_epochs) {
    const double progress = epoch / options_.warmup_epochs;
    const double start = options_.warmup_start_fraction;
    return peak_ * (start + (1 - start) * progress);
  }
  if (options_.decay == DecayKind::kCosine) {
    const double span = options_.total_epochs - options_.warmup_epochs;
    const double progress = span > 0 ? std::min(1.0, (epoch - options_.warmup_epochs) / span) : 1.0;
    return peak_ * 0.5 * (1 + std::cos(M_PI * progress));
  }
  double lr = peak_;
  for (int milestone : options_.milestones) {
    if (epoch >= milestone) lr *= options_.step_factor;
  }
  return lr;
}

std::string LinearScalingSchedule::describe(int world_size, int batch_per_rank, int accumulation_steps) const {
  std::ostringstream out;
  out << "world size " << world_size << ", batch per rank " << batch_per_rank;
  if (accumulation_steps > 1) out << " x " << accumulation_steps << " accumulated micro-batches";
  out << ", global batch " << options_.global_batch << ", scaled lr " << peak_ << " (base " << options_.base_lr << " x "
      << options_.global_batch << "/256), warm-up " << options_.warmup_epochs << " epochs, "
      << (options_.decay == DecayKind::kCosine ? "cosine" : "step") << " decay";
  return out.str();
}

}  // namespace dtrain::train
