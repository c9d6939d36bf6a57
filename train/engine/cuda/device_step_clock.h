#pragma once
// The GPU's own clock of each micro-batch, from a pair of timing events per micro-batch on the
// compute stream:
// - how long the GPU sat idle before it: the time between the end of the previous micro-batch's
//   last kernel and the start of this one's first (after its input copy). The trainer's data-wait
//   figure on GPUs is built from it: the host loop runs ahead of the GPU, so the time it spends
//   blocked on the loader says little about whether the GPU waited (bench/results/2026-11-25_h200:
//   82% host blocking while the GPU lost 8-10%);
// - the time from the previous micro-batch's start to its own: the GPU's pace, which the epoch's
//   median step is taken from, for the same reason (the host's step lasts as long as wherever it
//   blocked that step).
//
// Events are read without blocking as they complete; a ring of kRing pairs is reused, and only a
// pair kRing micro-batches old (long finished) is ever waited for before its reuse.
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <deque>
#include <vector>

#include "runtime/cuda/stream.h"
#include "train/observe/step_timer.h"

namespace dtrain::train::cuda {

class DeviceStepClock {
 public:
  explicit DeviceStepClock(int device);  // the GPU whose streams it will time

  // Around one micro-batch's work on `stream`: started() after the stream waits for its input,
  // finished() after its last kernel.
  void started(cudaStream_t stream);
  void finished(cudaStream_t stream);

  // Each micro-batch's times since the last call, oldest first, for those whose start the GPU has
  // reached (wait_all: every one started so far). The first micro-batch has no predecessor: both
  // times infinity (the GPU had nothing to do until it came).
  std::vector<DeviceMicroBatchTime> take(bool wait_all);

 private:
  static constexpr int kRing = 16;
  static constexpr size_t kMaxReady = size_t{1} << 16;
  // Reads micro-batch `index`'s times into ready_ (waiting for its event when `wait`); false when
  // its start has not completed and wait is false.
  bool read(long index, bool wait);

  std::array<runtime::CudaEvent, kRing> started_, finished_;
  long next_ = 0;    // the micro-batch started() records next
  long unread_ = 0;  // the oldest whose times are not in ready_ yet
  std::deque<DeviceMicroBatchTime> ready_;
};

}  // namespace dtrain::train::cuda
