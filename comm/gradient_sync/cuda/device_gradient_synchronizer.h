#pragma once
// Averages a GPU replica's gradients over the ranks while backward runs, without the host ever
// waiting on the GPU: the device counterpart of GradientSynchronizer (gradient_synchronizer.h),
// with the same bucket bookkeeping (GradientBuckets) and consistency-check policy.
//
// The fp32 flat gradient buffer (backward order) is cut into buckets (a BucketPlan). The layers report each
// gradient right after queueing the kernel that writes it (mark_ready). When a bucket's last
// element is reported, an event is recorded on the compute stream, the comm stream waits for it,
// and the bucket's all-reduce (average) is queued on the comm stream, where it runs beside the
// rest of backward. finish() queues what is left and makes the compute stream wait for the comm
// stream, so the optimizer that follows on the compute stream sees averaged gradients.
//
// Consistency checks: GradientBuckets::check_calls_this_step() (the first step only).
//
// Errors: every bucket's Work is kept. finish() of step N waits for the Works of step N-1 (done
// long before: they are the previous step's transfers) and polls those of step N, so a failed
// all-reduce throws from finish() one step later at the latest, on every rank whose Work failed;
// wait_all() waits for everything queued. The destructor waits too, and ends the process if a
// Work failed and nothing reported it (a replica that silently missed an average must not go on).
// CUDA builds only; not thread-safe.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/gradient_sync/gradient_buckets.h"
#include "comm/gradient_sync/gradient_sync.h"
#include "runtime/cuda/stream.h"

namespace dtrain::comm {

class DeviceGradientSynchronizer final : public GradientSync {
 public:
  // plan: the cuts of the buffer (plan_buckets); `compute`: the stream backward runs on;
  // `device`: its GPU (the comm stream is made there).
  DeviceGradientSynchronizer(Communicator& comm, float* gradients, BucketPlan plan, cudaStream_t compute, int device);
  ~DeviceGradientSynchronizer() override;

  void begin_step() override;
  void mark_ready(size_t begin, size_t end) override;
  void finish() override;
  // Waits for every all-reduce queued so far and rethrows the first failure.
  void wait_all();

  // Called on the host right before a bucket's all-reduce is queued on the comm stream (after the
  // stream's wait for backward) with after = false, and right after with after = true, so the
  // caller can record CUDA events around the collective as it really runs on the stream (the
  // timeline of dtrain-train). bytes: the bucket's fp32 bytes. What the call before returns is
  // where the all-reduce reports its phases (Collective::trace, comm/call_trace.h; null: nowhere).
  // Empty (the default): nothing.
  using BucketObserver = std::function<CallTrace*(size_t bucket, size_t bytes, cudaStream_t comm_stream, bool after)>;
  void set_bucket_observer(BucketObserver observer) { observer_ = std::move(observer); }

  size_t bucket_count() const override { return buckets_.size(); }
  int launched_during_backward() const override { return buckets_.launched_during_backward(); }

 private:
  void launch(size_t bucket);

  Communicator& comm_;
  float* gradients_;
  cudaStream_t compute_;
  runtime::CudaStream comm_stream_;
  GradientBuckets buckets_;
  std::vector<runtime::CudaEvent> ready_;  // per bucket: backward has written it (compute stream)
  runtime::CudaEvent reduced_;
  std::vector<Work> this_step_, previous_step_;
  BucketObserver observer_;
};

}  // namespace dtrain::comm
