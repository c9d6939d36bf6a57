#include "train/engine/cuda/device_idle_clock.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "runtime/base/error.h"

namespace dtrain::train::cuda {

DeviceIdleClock::DeviceIdleClock(int device) {
  runtime::DeviceGuard on(device);
  for (int i = 0; i < kRing; ++i) {
    started_[static_cast<size_t>(i)] = runtime::CudaEvent(true);
    finished_[static_cast<size_t>(i)] = runtime::CudaEvent(true);
  }
}

void DeviceIdleClock::started(cudaStream_t stream) {
  // Micro-batch next_'s pair reuses that of next_ - kRing; the gap of next_ - kRing + 1 still needs
  // its finished event, so gaps up to there are read first (kRing - 1 micro-batches old: done).
  while (unread_ <= next_ - kRing + 1) read(unread_, true);
  started_[static_cast<size_t>(next_ % kRing)].record(stream);
}

void DeviceIdleClock::finished(cudaStream_t stream) {
  finished_[static_cast<size_t>(next_ % kRing)].record(stream);
  ++next_;
}

bool DeviceIdleClock::read(long index, bool wait) {
  DTRAIN_CHECK(index == unread_ && index < next_) << "idle clock read out of order";
  const runtime::CudaEvent& start = started_[static_cast<size_t>(index % kRing)];
  if (wait) {
    start.synchronize();
  } else if (!start.is_complete()) {
    return false;
  }
  // The first micro-batch had nothing before it: the GPU was idle until it came, however long.
  double gap = std::numeric_limits<double>::infinity();
  if (index > 0) {
    const runtime::CudaEvent& before = finished_[static_cast<size_t>((index - 1) % kRing)];
    before.synchronize();  // stream order: done when this micro-batch's start is
    gap = std::max(0.0, static_cast<double>(start.elapsed_ms_since(before)) / 1000.0);
  }
  // A caller that never takes them (dtrain-bench-train) keeps a bounded backlog; the trainer takes
  // them after every micro-batch, far below the bound.
  if (ready_.size() == kMaxReady) ready_.pop_front();
  ready_.push_back(gap);
  ++unread_;
  return true;
}

std::vector<double> DeviceIdleClock::take_idle(bool wait_all) {
  while (unread_ < next_ && read(unread_, wait_all)) {
  }
  std::vector<double> out(ready_.begin(), ready_.end());
  ready_.clear();
  return out;
}

}  // namespace dtrain::train::cuda
