#pragma once
// Averages a GPU replica's gradients over the ranks while backward runs, without the host ever
// waiting on the GPU: the device counterpart of comm::GradientSynchronizer.
//
// The fp32 flat gradient buffer (backward order) is cut into buckets. The layers report each
// gradient right after queueing the kernel that writes it (mark_ready). When a bucket's last
// element is reported, an event is recorded on the compute stream, the comm stream waits for it,
// and the bucket's all-reduce (average) is queued on the comm stream, where it runs beside the
// rest of backward. finish() queues what is left and makes the compute stream wait for the comm
// stream, so the optimizer that follows on the compute stream sees averaged gradients.
//
// The communicator's per-call consistency check (an MPI exchange) runs on the first step only:
// it proves every rank has the same buckets, and later steps cannot differ from the first.
#include <cstddef>
#include <vector>

#include "comm/communicator.h"
#include "comm/gradient_buckets.h"
#include "runtime/core/cuda/stream.h"

namespace dtrain::train::cuda {

class DeviceGradientSync {
 public:
  DeviceGradientSync(comm::Communicator& comm, float* gradients, size_t count, size_t bucket_bytes,
                     cudaStream_t compute, int device);

  void begin_step();
  void mark_ready(size_t begin, size_t end);
  void finish();

  size_t bucket_count() const { return buckets_.size(); }
  // Buckets queued from mark_ready (i.e. overlapping backward) in the latest step.
  int launched_during_backward() const { return buckets_.launched_during_backward(); }

 private:
  void launch(size_t bucket);

  comm::Communicator& comm_;
  float* gradients_;
  cudaStream_t compute_;
  core::CudaStream comm_stream_;
  comm::GradientBuckets buckets_;
  std::vector<core::CudaEvent> ready_;  // per bucket: backward has written it (compute stream)
  core::CudaEvent reduced_;
  int steps_ = 0;
};

}  // namespace dtrain::train::cuda
