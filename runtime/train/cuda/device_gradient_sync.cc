#include "runtime/train/cuda/device_gradient_sync.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace dtrain::train::cuda {

DeviceGradientSync::DeviceGradientSync(comm::Communicator& comm, float* gradients, size_t count,
                                       size_t bucket_bytes, cudaStream_t compute, int device)
    : comm_(comm), gradients_(gradients), compute_(compute), comm_stream_(device, -1) {
  DTRAIN_CHECK(bucket_bytes >= sizeof(float)) << "gradient bucket of " << bucket_bytes << " bytes";
  const size_t per_bucket = bucket_bytes / sizeof(float);
  for (size_t begin = 0; begin < count; begin += per_bucket) {
    buckets_.emplace_back();
    buckets_.back().begin = begin;
    buckets_.back().end = std::min(count, begin + per_bucket);
  }
}

void DeviceGradientSync::begin_step() {
  DTRAIN_CHECK(!in_step_) << "gradient synchronization begun twice without finish()";
  for (Bucket& b : buckets_) {
    b.pending = b.end - b.begin;
    b.launched = false;
  }
  launched_early_ = 0;
  comm_.set_consistency_check(steps_ == 0);
  in_step_ = true;
}

void DeviceGradientSync::mark_ready(size_t begin, size_t end) {
  DTRAIN_CHECK(in_step_) << "gradient reported outside a step";
  // Buckets are sorted and contiguous: visit the ones [begin, end) overlaps.
  auto it = std::upper_bound(buckets_.begin(), buckets_.end(), begin,
                             [](size_t at, const Bucket& b) { return at < b.end; });
  for (; it != buckets_.end() && it->begin < end; ++it) {
    const size_t overlap = std::min(end, it->end) - std::max(begin, it->begin);
    DTRAIN_CHECK(overlap <= it->pending) << "gradient elements [" << begin << ", " << end << ") reported twice";
    it->pending -= overlap;
    if (it->pending == 0) {
      launch(*it);
      ++launched_early_;
    }
  }
}

void DeviceGradientSync::launch(Bucket& bucket) {
  bucket.ready.record(compute_);
  bucket.ready.make_stream_wait(comm_stream_.get());
  float* data = gradients_ + bucket.begin;
  comm_.all_reduce(data, data, bucket.end - bucket.begin, core::DType::kF32, comm::ReduceOp::kAverage,
                   comm::Location::gpu(comm_stream_.get()));
  bucket.launched = true;
}

void DeviceGradientSync::finish() {
  DTRAIN_CHECK(in_step_) << "finish() without begin_step()";
  for (Bucket& b : buckets_) {
    if (!b.launched) launch(b);
  }
  reduced_.record(comm_stream_.get());
  reduced_.make_stream_wait(compute_);
  in_step_ = false;
  ++steps_;
}

}  // namespace dtrain::train::cuda
