#pragma once
// The GPU step as CUDA graphs (the default; DTRAIN_CUDA_GRAPHS=0 is eager): what one step queues
// on the compute stream (normalize, forward, loss, backward, SGD update: hundreds of kernels) is
// captured once per key and replayed with one cudaGraphLaunch, so the host's launch cost leaves
// the step. A capture may be cut into several graphs, where the caller queues something eagerly
// between them (the bucket all-reduces on their own stream: captured, the communicator's
// host-side bookkeeping and error checks per call would not replay).
//
// A graph replays the addresses and kernel arguments it was captured with. So: every buffer it
// touches must stay where it is while it lives (the allocator's graph pool holds what the capture
// allocated, caching_allocator.h; the owner drops the graphs before it moves anything else), and a
// per-step value (the learning rate) is read from device memory written before each launch.
//
// Capture is cudaStreamCaptureModeThreadLocal: a call on this thread that would break the capture
// (a host wait, a copy to pageable memory) fails it, which we want to see (the device allocator's
// cudaMalloc relaxes the mode for itself: the graph pool keeps that memory), while the
// loader's and the communicator's threads keep allocating pinned memory and syncing their own
// streams undisturbed (the global mode would fail the capture for those).
//
// The pool is the device's one: one graphed step per device at a time (a rank's).
#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dtrain::train::cuda {

class StepGraphs {
 public:
  StepGraphs(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  bool has(int key) const { return execs_.count(key) != 0; }
  // Captures what `queue` puts on the stream as the graphs of `key`; the work is recorded, not
  // run. Inside `queue`, cut() ends one graph and starts the next, where the caller must do
  // something eagerly between them (queue a bucket's all-reduce). Returns "" or why the capture
  // failed: then no graph is kept, the stream is out of capture again, and the caller queues the
  // work eagerly instead.
  std::string capture(int key, const std::function<void()>& queue);
  void cut();
  // The graphs of `key` (has(key)), in capture order; launch(key, i) queues the i-th on the stream.
  size_t segments(int key) const { return execs_.at(key).size(); }
  void launch(int key, size_t segment);
  // Drops every graph (after the queued launches finish) and gives the pool back.
  void clear();
  long captures() const { return captures_; }
  // Whether these graphs have allocated from the device's graph pool since they last gave it back.
  bool holds_pool() const { return pooled_; }

 private:
  // Ends the capture in progress into captured_ (an empty graph as a null one).
  void end_segment();

  int device_;
  cudaStream_t stream_;
  std::map<int, std::vector<cudaGraphExec_t>> execs_;  // null: nothing to launch
  std::vector<cudaGraph_t> captured_;                  // of the capture in progress
  bool capturing_ = false;
  bool pooled_ = false;  // began a capture into the pool and has not released it since
  long captures_ = 0;
};

}  // namespace dtrain::train::cuda
