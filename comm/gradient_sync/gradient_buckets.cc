#include "comm/gradient_sync/gradient_buckets.h"

namespace dtrain::comm {

GradientBuckets::GradientBuckets(size_t count, size_t bucket_bytes)
    : count_(count), per_bucket_(bucket_bytes / sizeof(float)) {
  DTRAIN_USAGE_CHECK(bucket_bytes >= sizeof(float)) << "bucket size " << bucket_bytes << " B is too small";
  const size_t buckets = (count + per_bucket_ - 1) / per_bucket_;
  pending_.assign(buckets, 0);
  launched_.assign(buckets, false);
}

void GradientBuckets::begin_step() {
  DTRAIN_CHECK(!in_step_) << "gradient step begun twice without finishing";
  for (size_t i = 0; i < size(); ++i) {
    pending_[i] = end(i) - begin(i);
    launched_[i] = false;
  }
  launched_early_ = 0;
  in_step_ = true;
  ++steps_begun_;
}

}  // namespace dtrain::comm
