#pragma once
// The GPU step as CUDA graphs (DTRAIN_CUDA_GRAPHS=1): what one step queues on the compute stream
// (normalize, forward, loss, backward, SGD update: hundreds of kernels) is captured once per key
// and replayed with one cudaGraphLaunch, so the host's launch cost leaves the step.
//
// A graph replays the addresses and kernel arguments it was captured with. So: every buffer it
// touches must stay where it is while it lives (the allocator's graph pool holds what the capture
// allocated, caching_allocator.h; the owner drops the graphs before it moves anything else), and a
// per-step value (the learning rate) is read from device memory written before each launch.
//
// Capture is cudaStreamCaptureModeThreadLocal: a call on this thread that would break the capture
// (cudaMalloc, a host wait, a copy to pageable memory) fails it, which we want to see, while the
// loader's and the communicator's threads keep allocating pinned memory and syncing their own
// streams undisturbed (the global mode would fail the capture for those).
//
// The pool is the device's one: one graphed step per device at a time (a rank's).
#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <string>

namespace dtrain::train::cuda {

class StepGraphs {
 public:
  StepGraphs(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  bool has(int key) const { return execs_.count(key) != 0; }
  // Captures what `queue` puts on the stream as the graph of `key`; the work is recorded, not run.
  // Returns "" or why the capture failed: then no graph is kept, the stream is out of capture
  // again, and the caller queues the work eagerly instead.
  std::string capture(int key, const std::function<void()>& queue);
  // Queues the graph of `key` (has(key)) on the stream.
  void launch(int key);
  // Drops every graph (after the queued launches finish) and gives the pool back.
  void clear();
  long captures() const { return captures_; }
  long launches() const { return launches_; }

 private:
  int device_;
  cudaStream_t stream_;
  std::map<int, cudaGraphExec_t> execs_;
  long captures_ = 0, launches_ = 0;
};

}  // namespace dtrain::train::cuda
