#pragma once
// The bucket bookkeeping of gradient averaging during backward, shared by the host synchronizer
// (GradientSynchronizer) and the device one (DeviceGradientSynchronizer), which differ only in how
// a bucket's all-reduce is started and waited for. The bucket count lives here, and so does the
// consistency-check policy of both: the communicator checks every call of the first step (that
// every rank has the same buckets), and later steps cannot differ from the first.
//
// [0, count) fp32 elements are cut where a BucketPlan says (bucket_plan.h). Each step, backward
// reports the ranges it has written; the moment the last element of a bucket that backward
// reports (the plan counts them: alignment gaps are never reported) is in, `launch(index)` is
// called for it, once. finish_step() launches the buckets some elements of which were never
// reported, so every bucket is averaged every step.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "comm/gradient_sync/bucket_plan.h"
#include "runtime/base/error.h"

namespace dtrain::comm {

class GradientBuckets {
 public:
  explicit GradientBuckets(BucketPlan plan);

  size_t size() const { return pending_.size(); }
  size_t begin(size_t i) const { return plan_.cuts[i]; }
  size_t end(size_t i) const { return plan_.cuts[i + 1]; }

  void begin_step();

  template <typename Launch>
  void mark_ready(size_t begin, size_t end, Launch&& launch) {
    DTRAIN_CHECK(in_step_ && begin <= end && end <= count())
        << "gradient range [" << begin << ", " << end << ") reported outside a step or a buffer of " << count();
    for (size_t i = bucket_of(begin); i < size() && this->begin(i) < end; ++i) {
      const size_t overlap = std::min(end, this->end(i)) - std::max(begin, this->begin(i));
      DTRAIN_CHECK(overlap <= pending_[i]) << "gradient elements reported twice in bucket " << i;
      pending_[i] -= overlap;
      if (pending_[i] == 0 && !launched_[i]) {
        launched_[i] = true;
        ++launched_early_;
        launch(i);
      }
    }
  }

  template <typename Launch>
  void finish_step(Launch&& launch) {
    DTRAIN_CHECK(in_step_) << "gradient step finished without begin_step()";
    for (size_t i = 0; i < size(); ++i) {
      if (!launched_[i]) {
        launched_[i] = true;
        launch(i);
      }
    }
    in_step_ = false;
  }

  // Buckets launched from mark_ready, i.e. overlapping backward, in the latest step.
  int launched_during_backward() const { return launched_early_; }
  // Whether this step's all-reduces should be consistency-checked (the first step only).
  bool check_calls_this_step() const { return steps_begun_ == 1; }

 private:
  size_t count() const { return plan_.cuts.empty() ? 0 : plan_.cuts.back(); }
  // The bucket holding element `at` (size() when there is none).
  size_t bucket_of(size_t at) const {
    return static_cast<size_t>(std::upper_bound(plan_.cuts.begin(), plan_.cuts.end(), at) - plan_.cuts.begin()) - 1;
  }

  BucketPlan plan_;
  std::vector<size_t> pending_;  // elements not yet reported this step
  std::vector<bool> launched_;
  int launched_early_ = 0;
  bool in_step_ = false;
  long steps_begun_ = 0;
};

}  // namespace dtrain::comm
