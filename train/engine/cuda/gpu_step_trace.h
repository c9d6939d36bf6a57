#pragma once
// The GPU side of dtrain-train's timeline (timeline.h): spans timed by CUDA events recorded on the
// stream where the work runs (copy, compute, comm), so they show when the GPU really did it, not
// when the host queued it. Recording only queues events (the host never waits inside a step);
// resolve() records one more event on the compute stream, waits for it once, and turns every
// event into host time (runtime::steady_seconds()) by its distance to that one, taken at the moment the
// wait returned. Every event recorded before it on any of the streams precedes it: the compute
// stream waits for the copy into its input and for the comm stream's all-reduces before the SGD
// update.
//
// Events are created as spans need them (timing events, reused after each resolve()); a span
// past the recorder's cap is dropped before any event is recorded.
//
// A bucket's all-reduce reports its phases (comm/call_trace.h: the hierarchical backend's
// intra-node and cross-node steps, the staged pieces' copies and host ring) to bucket_phases():
// device phases become spans between events on the streams they are queued on, host phases (the
// host ring, reported by the communicator's worker thread) spans in host time, all on the comm
// track inside the bucket's span. Not thread-safe, but for the host phases' reports.
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "comm/call_trace.h"
#include "runtime/cuda/stream.h"
#include "train/observe/timeline_events.h"

namespace dtrain::train::cuda {

class GpuStepTrace {
 public:
  explicit GpuStepTrace(int device);
  ~GpuStepTrace();

  // The spans that follow belong to global step `step` (its micro-batch `micro_batch` with
  // accumulation, else -1) and go to `recorder`.
  void begin_step(TimelineRecorder* recorder, long step, int micro_batch = -1);
  // Records the span's start on `stream` and returns its handle, or -1 when the cap dropped it
  // (end() then does nothing).
  int begin(cudaStream_t stream, TimelineTrack track, const char* name, long bucket = -1, int64_t bytes = -1,
            int piece = -1);
  void end(int handle, cudaStream_t stream);
  // Where bucket `bucket`'s all-reduce of the current step reports its phases (Collective::trace);
  // nullptr when the step is not recorded. Lives until resolve().
  comm::CallTrace* bucket_phases(long bucket);
  // Waits for everything recorded so far (one event on `compute`, after the latest step) and adds
  // the spans, in host time, to their recorders. Runs on the trace's device.
  void resolve(cudaStream_t compute);

 private:
  class BucketPhases;
  struct HostSpan {
    TimelineRecorder* recorder;
    TimelineSpan span;
  };
  void add_host_span(const HostSpan& span);

  struct Pending {
    TimelineRecorder* recorder;
    TimelineSpan span;
    size_t begin_event;
    size_t end_event;
  };
  size_t next_event();

  int device_;
  TimelineRecorder* recorder_ = nullptr;
  long step_ = 0;
  int micro_batch_ = -1;
  std::vector<runtime::CudaEvent> events_;
  size_t used_ = 0;
  std::vector<Pending> pending_;
  runtime::CudaEvent anchor_;
  std::vector<std::unique_ptr<BucketPhases>> bucket_phases_;  // since the last resolve()
  std::mutex host_mutex_;                                     // host_spans_, written by comm workers
  std::vector<HostSpan> host_spans_;
};

}  // namespace dtrain::train::cuda
