#include "comm/gradient_sync/bucket_plan.h"

#include <algorithm>
#include <sstream>

#include "runtime/base/error.h"

namespace dtrain::comm {
namespace {

// `ranges` sorted by position, checked disjoint and inside [0, count).
std::vector<GradientRange> sorted_ranges(size_t count, std::span<const GradientRange> ranges) {
  std::vector<GradientRange> sorted(ranges.begin(), ranges.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const GradientRange& a, const GradientRange& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < sorted.size(); ++i) {
    DTRAIN_CHECK(sorted[i].begin <= sorted[i].end && sorted[i].end <= count)
        << "gradient range [" << sorted[i].begin << ", " << sorted[i].end << ") is outside a buffer of " << count;
    DTRAIN_CHECK(i == 0 || sorted[i - 1].end <= sorted[i].begin)
        << "gradient ranges [" << sorted[i - 1].begin << ", " << sorted[i - 1].end << ") and [" << sorted[i].begin
        << ", " << sorted[i].end << ") overlap";
  }
  return sorted;
}

// Cuts the plan as it is built: each new cut after the previous one, moved to a parameter boundary
// (where a parameter begins: the one before it and the gap between stay in the earlier bucket).
class Cutter {
 public:
  Cutter(size_t count, const std::vector<GradientRange>& ranges) : count_(count) {
    for (const GradientRange& r : ranges) {
      if (r.begin > 0 && r.begin < r.end) boundaries_.push_back(r.begin);
    }
    cuts_.push_back(0);
  }

  size_t last() const { return cuts_.back(); }

  // A cut at `at` (past last(), before `limit`) for a bucket of about `elements`; a boundary
  // moved to stays before `limit` too, so that no bucket swallows the tail.
  void cut(size_t at, size_t elements, size_t limit) {
    size_t best = at, distance = elements / 8 + 1;
    const auto hi = std::lower_bound(boundaries_.begin(), boundaries_.end(), at);
    if (hi != boundaries_.end() && *hi < limit && *hi - at < distance) best = *hi, distance = *hi - at;
    if (hi != boundaries_.begin() && *(hi - 1) > last() && at - *(hi - 1) < distance) best = *(hi - 1);
    cuts_.push_back(best);
  }

  std::vector<size_t> finish() {
    cuts_.push_back(count_);
    return std::move(cuts_);
  }

 private:
  size_t count_;
  std::vector<size_t> boundaries_;
  std::vector<size_t> cuts_;
};

}  // namespace

BucketSizes bucket_sizes_mib(int body_mib, int tail_mib, int first_mib) {
  DTRAIN_USAGE_CHECK(body_mib > 0 && tail_mib >= 0 && first_mib >= 0)
      << "gradient bucket sizes " << body_mib << ", tail " << tail_mib << ", first " << first_mib
      << " MiB: the body must be positive, the others not negative";
  return BucketSizes{static_cast<size_t>(body_mib) << 20, static_cast<size_t>(tail_mib) << 20,
                     static_cast<size_t>(first_mib) << 20};
}

BucketPlan plan_buckets(size_t count, const BucketSizes& sizes, std::span<const GradientRange> ranges) {
  const size_t body = sizes.body_bytes / sizeof(float);
  const size_t tail = sizes.tail_bytes / sizeof(float), first = sizes.first_bytes / sizeof(float);
  DTRAIN_USAGE_CHECK(body >= 1) << "gradient bucket size " << sizes.body_bytes << " B is under one fp32 element";
  const std::vector<GradientRange> sorted = sorted_ranges(count, ranges);
  BucketPlan plan;
  if (count == 0) return plan;
  // A tail as large as the buffer is all of it.
  const size_t tail_begin = tail == 0 ? count : count - std::min(tail, count);
  Cutter cutter(count, sorted);
  if (first > 0 && first < tail_begin) cutter.cut(first, first, tail_begin);
  while (cutter.last() + body < tail_begin) cutter.cut(cutter.last() + body, body, tail_begin);
  if (tail_begin > cutter.last() && tail_begin < count) cutter.cut(tail_begin, tail, count);
  plan.cuts = cutter.finish();

  plan.reported.assign(plan.size(), 0);
  if (sorted.empty()) {
    for (size_t i = 0; i < plan.size(); ++i) plan.reported[i] = plan.cuts[i + 1] - plan.cuts[i];
    return plan;
  }
  for (const GradientRange& r : sorted) {
    size_t i =
        static_cast<size_t>(std::upper_bound(plan.cuts.begin(), plan.cuts.end(), r.begin) - plan.cuts.begin()) - 1;
    for (; i < plan.size() && plan.cuts[i] < r.end; ++i) {
      plan.reported[i] += std::min(r.end, plan.cuts[i + 1]) - std::max(r.begin, plan.cuts[i]);
    }
  }
  return plan;
}

std::string describe_buckets(size_t buckets, const BucketSizes& sizes) {
  const auto mib = [](size_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  std::ostringstream text;
  text << buckets << " gradient bucket(s) of up to " << mib(sizes.body_bytes) << " MiB";
  if (buckets <= 1) return text.str();  // the whole buffer: no first or last of their own
  if (sizes.first_bytes > 0) text << ", the first (backward's first) " << mib(sizes.first_bytes) << " MiB";
  if (sizes.tail_bytes > 0) text << ", the last (backward's final one) " << mib(sizes.tail_bytes) << " MiB";
  return text.str();
}

}  // namespace dtrain::comm
