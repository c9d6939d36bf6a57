#include "train/engine/cuda/gpu_step_trace.h"

#include "runtime/base/error.h"

namespace dtrain::train::cuda {

// One bucket's all-reduce in one step: device phases become event-timed spans (begin and end
// calls nest, so a stack pairs them), host phases go to the trace's inbox with the step they
// belong to (the worker reports them after the step thread has moved on).
class GpuStepTrace::BucketPhases final : public comm::CallTrace {
 public:
  BucketPhases(GpuStepTrace& trace, long bucket)
      : trace_(trace),
        recorder_(trace.recorder_),
        step_(trace.step_),
        micro_batch_(trace.micro_batch_),
        bucket_(bucket) {}

  void device_phase(const comm::CallPhase& phase, void* stream, bool after) override {
    const auto s = static_cast<cudaStream_t>(stream);
    if (!after) {
      open_.push_back(trace_.begin(s, TimelineTrack::kComm, phase.name, bucket_, phase.bytes, phase.piece));
    } else if (!open_.empty()) {
      trace_.end(open_.back(), s);
      open_.pop_back();
    }
  }
  void host_phase(const comm::CallPhase& phase) override {
    trace_.add_host_span({recorder_, TimelineSpan{TimelineTrack::kComm, phase.name, step_, phase.begin, phase.end,
                                                  bucket_, phase.bytes, micro_batch_, phase.piece}});
  }

 private:
  GpuStepTrace& trace_;
  TimelineRecorder* recorder_;
  long step_;
  int micro_batch_;
  long bucket_;
  std::vector<int> open_;
};

GpuStepTrace::GpuStepTrace(int device) : device_(device), anchor_(device, true) {}

GpuStepTrace::~GpuStepTrace() = default;

comm::CallTrace* GpuStepTrace::bucket_phases(long bucket) {
  if (recorder_ == nullptr) return nullptr;
  bucket_phases_.push_back(std::make_unique<BucketPhases>(*this, bucket));
  return bucket_phases_.back().get();
}

void GpuStepTrace::add_host_span(const HostSpan& span) {
  std::lock_guard lock(host_mutex_);
  host_spans_.push_back(span);
}

void GpuStepTrace::begin_step(TimelineRecorder* recorder, long step, int micro_batch) {
  recorder_ = recorder;
  step_ = step;
  micro_batch_ = micro_batch;
}

size_t GpuStepTrace::next_event() {
  if (used_ == events_.size()) events_.emplace_back(device_, true);  // a timing event on the step's device
  return used_++;
}

int GpuStepTrace::begin(cudaStream_t stream, TimelineTrack track, const char* name, long bucket, int64_t bytes,
                        int piece) {
  if (recorder_ == nullptr || !recorder_->reserve()) return -1;
  Pending p{recorder_, TimelineSpan{track, name, step_, 0, 0, bucket, bytes, micro_batch_, piece}, next_event(), 0};
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
  if (pending_.empty() && bucket_phases_.empty()) return;
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
  // The anchor also follows every host phase of the recorded steps: the staged pieces' copies
  // back (which the comm stream, and so the compute stream, waits for) wait for the host ring,
  // which reports before it lets them go.
  std::lock_guard lock(host_mutex_);
  for (const HostSpan& h : host_spans_) h.recorder->add(h.span);
  host_spans_.clear();
  bucket_phases_.clear();
}

}  // namespace dtrain::train::cuda
