#include "train/engine/cuda/device_step_clock.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "runtime/base/error.h"

namespace dtrain::train::cuda {

DeviceStepClock::DeviceStepClock(int device) {
  runtime::DeviceGuard on(device);
  for (int i = 0; i < kRing; ++i) {
    started_[static_cast<size_t>(i)] = runtime::CudaEvent(true);
    finished_[static_cast<size_t>(i)] = runtime::CudaEvent(true);
  }
}

void DeviceStepClock::started(cudaStream_t stream) {
  // Micro-batch next_'s pair reuses that of next_ - kRing; the times of next_ - kRing + 1 still need
  // its events, so times up to there are read first (kRing - 1 micro-batches old: done).
  while (unread_ <= next_ - kRing + 1) read(unread_, true);
  started_[static_cast<size_t>(next_ % kRing)].record(stream);
}

void DeviceStepClock::finished(cudaStream_t stream) {
  finished_[static_cast<size_t>(next_ % kRing)].record(stream);
  ++next_;
}

bool DeviceStepClock::read(long index, bool wait) {
  DTRAIN_CHECK(index == unread_ && index < next_) << "step clock read out of order";
  const runtime::CudaEvent& start = started_[static_cast<size_t>(index % kRing)];
  if (wait) {
    start.synchronize();
  } else if (!start.is_complete()) {
    return false;
  }
  // The first micro-batch had nothing before it: the GPU was idle until it came, however long.
  DeviceMicroBatchTime times{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  if (index > 0) {
    const size_t previous = static_cast<size_t>((index - 1) % kRing);
    finished_[previous].synchronize();  // stream order: done when this micro-batch's start is
    times.idle = std::max(0.0, static_cast<double>(start.elapsed_ms_since(finished_[previous])) / 1000.0);
    times.since = std::max(0.0, static_cast<double>(start.elapsed_ms_since(started_[previous])) / 1000.0);
  }
  // A caller that never takes them (dtrain-bench-train) keeps a bounded backlog; the trainer takes
  // them after every micro-batch, far below the bound.
  if (ready_.size() == kMaxReady) ready_.pop_front();
  ready_.push_back(times);
  ++unread_;
  return true;
}

std::vector<DeviceMicroBatchTime> DeviceStepClock::take(bool wait_all) {
  while (unread_ < next_ && read(unread_, wait_all)) {
  }
  std::vector<DeviceMicroBatchTime> out(ready_.begin(), ready_.end());
  ready_.clear();
  return out;
}

}  // namespace dtrain::train::cuda
