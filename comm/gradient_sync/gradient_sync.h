#pragma once
// Averaging a model's gradients over the ranks while backward still runs, as the step engines see
// it: the host synchronizer (GradientSynchronizer, host buffers, Work handles) and the device one
// (DeviceGradientSynchronizer, CUDA streams and events) share this contract. The step engines hold
// the concrete types, because each also has what the other lacks (the host one's bucket_spans, the
// device one's wait_all and bucket observer); nothing calls through the interface yet.
//
// One step at a time: begin_step(), mark_ready() for every element of the flat gradient buffer
// exactly once (in any order, ranges of any size), finish(). After finish() the buffer holds the
// average (on the host) or the compute stream will see it (on a GPU). A failed all-reduce throws
// from finish(); each implementation says which step's finish().
#include <cstddef>

namespace dtrain::comm {

// The bucket sizes when nobody chose them, for every tool (the trainer's bucket_mib and
// tail_bucket_mib, dtrain-bench-train's flags of the same names, the GPU step's options): change
// them here. The body: PyTorch DDP's 25 MiB, so the two are compared like for like. The tail: the
// bucket backward completes last (bucket_plan.h), small, because none of its all-reduce overlaps
// backward. Multi-node runs (4x H100 as 2x2, hierarchical) measured 82% of one GPU's rate at 25
// MiB against 90-91% at 4-16 MiB: bench/run_gpu_bucket_sweep.sh measures the pairs.
inline constexpr int kDefaultBucketMib = 25;
inline constexpr int kDefaultTailBucketMib = 1;

class GradientSync {
 public:
  virtual ~GradientSync() = default;

  virtual void begin_step() = 0;
  virtual void mark_ready(size_t begin, size_t end) = 0;
  virtual void finish() = 0;

  virtual size_t bucket_count() const = 0;
  // Buckets whose all-reduce started from mark_ready, i.e. overlapped with backward, last step.
  virtual int launched_during_backward() const = 0;
};

}  // namespace dtrain::comm
