#pragma once
// Averages a model's gradients over the ranks while backward is still running (DDP / Horovod style).
//
// The gradients live in one flat buffer laid out in the order backward produces them, cut into
// buckets of consecutive elements where a BucketPlan says (bucket_plan.h). Backward reports each finished range with
// mark_ready(); the moment a bucket's last element is reported, its all-reduce (average) starts on
// the communicator and runs while backward continues with earlier layers. finish() starts whatever
// is left, waits for every bucket, and leaves the buffer averaged. Optionally the wire format is
// bf16 or fp16: a bucket is cast down for the all-reduce and back to fp32 afterwards.
//
// One step at a time: begin_step(), mark_ready() for every element exactly once, finish().
// The communicator checks every call of the first step only (GradientBuckets says why). A failed
// all-reduce throws from finish(). The destructor waits for every all-reduce still queued (a step
// abandoned by an exception in backward), so none touches the gradients or the wire copies after
// they are gone; their failures are dropped then.
// Host buffers (the CPU path; the GPU path's counterpart is DeviceGradientSynchronizer);
// not thread-safe.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "comm/gradient_sync/gradient_buckets.h"
#include "comm/gradient_sync/gradient_sync.h"
#include "runtime/memory/buffer.h"

namespace dtrain::comm {

class GradientSynchronizer final : public GradientSync {
 public:
  // wire: kF32, kBF16 or kF16. plan: the cuts of [0, count) (plan_buckets(count, ...)).
  GradientSynchronizer(Communicator& comm, float* gradients, BucketPlan plan, DType wire);
  ~GradientSynchronizer() override;
  GradientSynchronizer(const GradientSynchronizer&) = delete;
  GradientSynchronizer& operator=(const GradientSynchronizer&) = delete;

  void begin_step() override;
  void mark_ready(size_t begin, size_t end) override;
  void finish() override;

  size_t bucket_count() const override { return buckets_.size(); }
  int launched_during_backward() const override { return buckets_.launched_during_backward(); }

  // When each bucket's all-reduce of the latest finished step really ran (Work::span: on the comm
  // worker thread, steady_clock seconds; NaN where the backend does not say), in bucket order,
  // with the bytes it moved (in the wire format). For the timeline of dtrain-train.
  struct BucketSpan {
    size_t bucket;
    size_t bytes;
    double begin;
    double end;
  };
  std::vector<BucketSpan> bucket_spans() const;

 private:
  void launch(size_t bucket);

  Communicator& comm_;
  float* gradients_;
  DType wire_;
  GradientBuckets buckets_;
  std::vector<Work> work_;                  // per bucket, this step
  std::vector<runtime::Buffer> wire_copy_;  // per bucket: the 16-bit copy when the wire format is narrower
  uint64_t steps_ = 0;
  uint64_t fault_step_ = 0;  // DTRAIN_FAULT_INJECT_BACKWARD (fault_injection.h)
};

}  // namespace dtrain::comm
