#include "comm/gradient_synchronizer.h"

#include <algorithm>

#include "comm/host_reduce.h"
#include "runtime/core/error.h"

namespace dtrain::comm {

GradientSynchronizer::GradientSynchronizer(Communicator& comm, float* gradients, size_t count, size_t bucket_bytes,
                                           DType wire)
    : comm_(comm), gradients_(gradients), count_(count), wire_(wire) {
  DTRAIN_USAGE_CHECK(wire == DType::kF32 || wire == DType::kBF16 || wire == DType::kF16)
      << "gradient wire format must be fp32, bf16 or fp16, not " << core::dtype_name(wire);
  DTRAIN_USAGE_CHECK(bucket_bytes >= sizeof(float)) << "bucket size " << bucket_bytes << " B is too small";
  const size_t per_bucket = bucket_bytes / sizeof(float);
  for (size_t begin = 0; begin < count; begin += per_bucket) {
    GradientBucket bucket;
    bucket.begin = begin;
    bucket.end = std::min(count, begin + per_bucket);
    if (wire != DType::kF32) bucket.wire = core::Buffer(core::MemoryKind::kHost, (bucket.end - begin) * 2);
    buckets_.push_back(std::move(bucket));
  }
}

void GradientSynchronizer::begin_step() {
  DTRAIN_CHECK(!in_step_) << "begin_step() called twice without finish()";
  for (GradientBucket& b : buckets_) {
    b.pending = b.end - b.begin;
    b.launched = false;
    b.work = Work();
  }
  launched_early_ = 0;
  in_step_ = true;
}

void GradientSynchronizer::mark_ready(size_t begin, size_t end) {
  DTRAIN_CHECK(in_step_ && begin <= end && end <= count_) << "mark_ready(" << begin << ", " << end << ") outside a step or buffer of " << count_;
  // Buckets are consecutive and equal-sized except the last: find the first one by division.
  const size_t per_bucket = buckets_.empty() ? 1 : buckets_.front().end - buckets_.front().begin;
  for (size_t i = begin / per_bucket; i < buckets_.size() && buckets_[i].begin < end; ++i) {
    GradientBucket& b = buckets_[i];
    const size_t overlap = std::min(end, b.end) - std::max(begin, b.begin);
    DTRAIN_CHECK(overlap <= b.pending) << "gradient elements reported twice in bucket " << i;
    b.pending -= overlap;
    if (b.pending == 0 && !b.launched) {
      launch(b);
      ++launched_early_;
    }
  }
}

void GradientSynchronizer::launch(GradientBucket& b) {
  const size_t n = b.end - b.begin;
  float* slice = gradients_ + b.begin;
  if (wire_ == DType::kF32) {
    b.work = comm_.all_reduce(slice, slice, n, DType::kF32, ReduceOp::kAverage);
  } else {
    narrow_from_f32(slice, 1.0f, b.wire.data(), wire_, n);
    b.work = comm_.all_reduce(b.wire.data(), b.wire.data(), n, wire_, ReduceOp::kAverage);
  }
  b.launched = true;
}

void GradientSynchronizer::finish() {
  DTRAIN_CHECK(in_step_) << "finish() without begin_step()";
  for (GradientBucket& b : buckets_) {
    if (!b.launched) launch(b);  // buckets some elements of which were never reported: sync anyway
  }
  for (GradientBucket& b : buckets_) {
    b.work.wait();
    if (wire_ != DType::kF32) widen_to_f32(b.wire.data(), wire_, gradients_ + b.begin, b.end - b.begin);
  }
  in_step_ = false;
}

}  // namespace dtrain::comm
