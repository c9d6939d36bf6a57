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
#include <memory>
#include <mutex>
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

  // While on (from the next begin_step()), each bucket's all-reduce reports its phases (the
  // hierarchical backend's intra-node and cross-node steps, call_trace.h) for bucket_spans(). Off
  // (the default), nothing is timed.
  void set_phase_timing(bool on) { phase_timing_ = on; }

  // When each bucket's all-reduce of the latest finished step really ran (Work::span: on the comm
  // worker thread, steady_clock seconds; NaN where the backend does not say), in bucket order,
  // with the bytes it moved (in the wire format), and, with phase timing on, its phases as the
  // backend reported them (none from backends without phases). For the timeline of dtrain-train.
  struct BucketSpan {
    size_t bucket;
    size_t bytes;
    double begin;
    double end;
    std::vector<CallPhase> phases;
  };
  std::vector<BucketSpan> bucket_spans() const;

 private:
  // One bucket's phases, reported on the communicator's worker thread.
  class PhaseLog final : public CallTrace {
   public:
    void host_phase(const CallPhase& phase) override;
    void device_phase(const CallPhase&, void*, bool) override {}  // host buffers only
    void clear();
    std::vector<CallPhase> phases() const;

   private:
    mutable std::mutex mutex_;
    std::vector<CallPhase> phases_;
  };
  void launch(size_t bucket);

  Communicator& comm_;
  float* gradients_;
  DType wire_;
  GradientBuckets buckets_;
  std::vector<Work> work_;                             // per bucket, this step
  std::vector<runtime::Buffer> wire_copy_;             // per bucket: the 16-bit copy when the wire format is narrower
  bool phase_timing_ = false;                          // from the next step on
  bool timed_ = false;                                 // this step
  std::vector<std::unique_ptr<PhaseLog>> phase_logs_;  // per bucket, made at the first timed step
  uint64_t steps_ = 0;
  uint64_t fault_step_ = 0;  // DTRAIN_FAULT_INJECT_BACKWARD (fault_injection.h)
};

}  // namespace dtrain::comm
