#pragma once
// Averages a model's gradients over the ranks while backward is still running (DDP / Horovod style).
//
// The gradients live in one flat buffer laid out in the order backward produces them, cut into
// buckets of consecutive elements (25 MiB by default). Backward reports each finished range with
// mark_ready(); the moment a bucket's last element is reported, its all-reduce (average) starts on
// the communicator and runs while backward continues with earlier layers. finish() starts whatever
// is left, waits for every bucket, and leaves the buffer averaged. Optionally the wire format is
// bf16 or fp16: a bucket is cast down for the all-reduce and back to fp32 afterwards.
//
// One step at a time: begin_step(), mark_ready() for every element exactly once, finish().
// Host buffers (the CPU path; the GPU path's counterpart is train::cuda::DeviceGradientSync);
// not thread-safe.
#include <cstddef>
#include <vector>

#include "comm/communicator.h"
#include "runtime/core/buffer.h"

namespace dtrain::comm {

struct GradientBucket {
  size_t begin = 0;  // element offsets into the flat gradient buffer
  size_t end = 0;
  size_t pending = 0;  // elements not yet reported this step
  bool launched = false;
  Work work;
  core::Buffer wire;  // 16-bit copy when the wire format is narrower than fp32
};

class GradientSynchronizer {
 public:
  // wire: kF32, kBF16 or kF16.
  GradientSynchronizer(Communicator& comm, float* gradients, size_t count, size_t bucket_bytes, DType wire);

  void begin_step();
  void mark_ready(size_t begin, size_t end);
  void finish();

  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  // Buckets whose all-reduce started inside mark_ready, i.e. overlapped with backward, last step.
  int launched_during_backward() const { return launched_early_; }

 private:
  void launch(GradientBucket& bucket);

  Communicator& comm_;
  float* gradients_;
  size_t count_;
  DType wire_;
  std::vector<GradientBucket> buckets_;
  int launched_early_ = 0;
  bool in_step_ = false;
};

}  // namespace dtrain::comm
