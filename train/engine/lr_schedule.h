#pragma once
// Learning rate per iteration (Goyal et al., "Accurate, Large Minibatch SGD"):
//   peak = base_lr * global_batch / 256                        (the linear scaling rule)
//   warm-up: linear from peak / warmup_start_divisor ... to peak over warmup_epochs,
//            updated every iteration (the gradual warm-up);
//   then step decay (x0.1 at each milestone epoch, default 30, 60, 80) or cosine to 0 at the end.
#include <string>
#include <vector>

namespace dtrain::train {

enum class DecayKind { kStep, kCosine };

struct LrScheduleOptions {
  double base_lr = 0.1;  // per 256 images
  int global_batch = 256;
  double warmup_epochs = 5;
  double warmup_start_fraction = 0.0;  // of the peak at iteration 0 (Goyal: start near 0)
  DecayKind decay = DecayKind::kStep;
  std::vector<int> milestones = {30, 60, 80};
  double step_factor = 0.1;
  int total_epochs = 90;
};

class LinearScalingSchedule {
 public:
  LinearScalingSchedule(const LrScheduleOptions& options, long iterations_per_epoch);

  double peak_lr() const { return peak_; }
  // The learning rate for iteration `iteration` (0-based, counted from the start of training; a
  // fraction after a resume on another global batch, where progress is counted in images).
  double lr_at(double iteration) const;
  // "world size 8, batch per rank 32, global batch 256, scaled lr 0.1 (base 0.1 x 256/256), warm-up
  // 5 epochs, step decay"; with accumulation_steps K > 1 the batch per rank reads "32 x K
  // accumulated micro-batches" (the global batch given to the constructor counts them).
  std::string describe(int world_size, int batch_per_rank, int accumulation_steps = 1) const;

 private:
  LrScheduleOptions options_;
  long per_epoch_;
  double peak_;
};

}  // namespace dtrain::train
