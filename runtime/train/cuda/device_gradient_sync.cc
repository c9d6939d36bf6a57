#include "runtime/train/cuda/device_gradient_sync.h"

namespace dtrain::train::cuda {

DeviceGradientSync::DeviceGradientSync(comm::Communicator& comm, float* gradients, size_t count,
                                       size_t bucket_bytes, cudaStream_t compute, int device)
    : comm_(comm),
      gradients_(gradients),
      compute_(compute),
      comm_stream_(device, -1),
      buckets_(count, bucket_bytes),
      ready_(buckets_.size()) {}

void DeviceGradientSync::begin_step() {
  buckets_.begin_step();
  comm_.set_consistency_check(steps_ == 0);
}

void DeviceGradientSync::mark_ready(size_t begin, size_t end) {
  buckets_.mark_ready(begin, end, [this](size_t i) { launch(i); });
}

void DeviceGradientSync::launch(size_t i) {
  ready_[i].record(compute_);
  ready_[i].make_stream_wait(comm_stream_.get());
  float* data = gradients_ + buckets_.begin(i);
  comm_.all_reduce(data, data, buckets_.end(i) - buckets_.begin(i), core::DType::kF32, comm::ReduceOp::kAverage,
                   comm::Location::gpu(comm_stream_.get()));
}

void DeviceGradientSync::finish() {
  buckets_.finish_step([this](size_t i) { launch(i); });
  reduced_.record(comm_stream_.get());
  reduced_.make_stream_wait(compute_);
  ++steps_;
}

}  // namespace dtrain::train::cuda
