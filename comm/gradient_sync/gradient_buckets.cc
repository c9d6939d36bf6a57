#include "comm/gradient_sync/gradient_buckets.h"

#include <utility>

namespace dtrain::comm {

GradientBuckets::GradientBuckets(BucketPlan plan) : plan_(std::move(plan)) {
  DTRAIN_CHECK(plan_.reported.size() == plan_.size())
      << "a bucket plan of " << plan_.size() << " buckets counts " << plan_.reported.size() << " of them";
  for (size_t i = 0; i < plan_.size(); ++i) {
    DTRAIN_CHECK(begin(i) < end(i) && plan_.reported[i] <= end(i) - begin(i))
        << "bucket " << i << " of a plan is empty or reports more than its elements";
  }
  pending_.assign(plan_.size(), 0);
  launched_.assign(plan_.size(), false);
}

void GradientBuckets::begin_step() {
  DTRAIN_CHECK(!in_step_) << "gradient step begun twice without finishing";
  for (size_t i = 0; i < size(); ++i) {
    pending_[i] = plan_.reported[i];
    launched_[i] = false;
  }
  launched_early_ = 0;
  in_step_ = true;
  ++steps_begun_;
}

}  // namespace dtrain::comm
