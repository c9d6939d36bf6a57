#pragma once
// Gradient accumulation (accumulation_steps K): K micro-batches make one optimizer step, whose
// gradient is the mean over their K x batch images, as one step on a K-times larger batch gives
// (without BN: each micro-batch normalizes with its own batch statistics, as in PyTorch).
//
// Backward writes (not adds) each micro-batch's gradients, so an engine keeps an fp32 running sum
// beside its gradient buffer and folds in every range as backward reports it finished:
//   micro-batch 1:        sum  = g
//   micro-batches 2..K-1: sum += g
//   micro-batch K:        g = (g + sum) / K, and only then is the range handed to the all-reduce
// So the micro-batches before the last run no collective at all (DDP's no_sync), and the last one's
// buckets all-reduce the accumulated mean while its backward goes on, as without accumulation.
// The optimizer step (momentum, weight decay, lr) runs once, after the K-th micro-batch.
// The sum is fp32 on both paths (the bf16 GPU path widens its weight gradients before reporting).
#include <cstddef>

namespace dtrain::train {

// Where a micro-batch sits in its optimizer step.
struct MicroBatch {
  int index = 0;  // 0-based
  int count = 1;  // micro-batches per optimizer step (accumulation_steps); 1: no accumulation
  bool last() const { return index + 1 == count; }
};

// An Error unless 0 <= index < count.
void check_micro_batch(const MicroBatch& m);

// The fold above for one finished range of n gradients of micro-batch m (host memory): `grads` is
// the range in the gradient buffer, `sum` the same range of the running sum. count 1: nothing.
void accumulate_gradient_range(const MicroBatch& m, float* grads, float* sum, size_t n);

}  // namespace dtrain::train
