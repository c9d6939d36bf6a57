#include "train/engine/cuda/gpu_step_trace.h"

#include "runtime/base/error.h"

namespace dtrain::train::cuda {

void GpuStepTrace::begin_step(TimelineRecorder* recorder, long step, int micro_batch) {
  recorder_ = recorder;
  step_ = step;
  micro_batch_ = micro_batch;
}

size_t GpuStepTrace::next_event() {
  if (used_ == events_.size()) events_.emplace_back(device_, true);  // a timing event on the step's device
  return used_++;
}

int GpuStepTrace::begin(cudaStream_t stream, TimelineTrack track, const char* name, long bucket, int64_t bytes) {
  if (recorder_ == nullptr || !recorder_->reserve()) return -1;
  Pending p{recorder_, TimelineSpan{track, name, step_, 0, 0, bucket, bytes, micro_batch_}, next_event(), 0};
  p.end_event = next_event();
  events_[p.begin_event].record(stream);
  pending_.push_back(p);
  return static_cast<int>(pending_.size() - 1);
}

void GpuStepTrace::end(int handle, cudaStream_t stream) {
  if (handle < 0) return;
  events_[pending_[static_cast<size_t>(handle)].end_event].record(stream);
}

void GpuStepTrace::resolve(cudaStream_t compute) {
  if (pending_.empty()) return;
  runtime::DeviceGuard on(device_);
  anchor_.record(compute);
  anchor_.synchronize();
  // The anchor completed no later than now: the wait returned right after it (the GPU was still
  // busy), or it completed right after it was recorded (the GPU had caught up).
  const double anchor_time = runtime::steady_seconds();
  for (Pending& p : pending_) {
    p.span.begin = anchor_time - anchor_.elapsed_ms_since(events_[p.begin_event]) * 1e-3;
    p.span.end = anchor_time - anchor_.elapsed_ms_since(events_[p.end_event]) * 1e-3;
    p.recorder->add_reserved(p.span);
  }
  pending_.clear();
  used_ = 0;
}

}  // namespace dtrain::train::cuda
