// The bucket plan (bucket_plan.h) and the bookkeeping that follows it (gradient_buckets.h): every
// element in exactly one bucket for awkward counts and sizes (0, 1, 7919, 2^20+3 elements; a tail
// bigger than the buffer, a tail as large as the body), equal buckets as before when tail and first
// are 0, cuts moved to parameter boundaries only within an eighth of a bucket, the alignment gaps
// left out of each bucket's count, and with ranges reported in backward order every bucket
// launching during backward, in buffer order, the small tail last.
#include "comm/gradient_sync/bucket_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "comm/gradient_sync/gradient_buckets.h"
#include "runtime/base/error.h"
#include "tests/support/test_seed.h"

namespace dtrain::comm {
namespace {

constexpr size_t kCounts[] = {0, 1, 7919, (size_t{1} << 20) + 3};

// Every element of [0, count) in exactly one bucket, the buckets non-empty and in order.
void expect_partition(const BucketPlan& plan, size_t count) {
  if (count == 0) {
    EXPECT_EQ(plan.size(), 0u);
    return;
  }
  ASSERT_GE(plan.size(), 1u);
  ASSERT_EQ(plan.reported.size(), plan.size());
  std::vector<int> owners(count, 0);
  for (size_t i = 0; i < plan.size(); ++i) {
    ASSERT_LT(plan.cuts[i], plan.cuts[i + 1]) << "bucket " << i << " is empty or out of order";
    for (size_t e = plan.cuts[i]; e < plan.cuts[i + 1] && e < count; ++e) ++owners[e];
  }
  EXPECT_EQ(plan.cuts.front(), 0u);
  EXPECT_EQ(plan.cuts.back(), count);
  EXPECT_EQ(std::count(owners.begin(), owners.end(), 1), static_cast<long>(count)) << "elements not in one bucket";
}

size_t elements(const BucketPlan& plan, size_t i) {
  return plan.cuts[i + 1] - plan.cuts[i];
}

TEST(BucketPlan, EqualBucketsWithoutTailOrFirst) {
  for (const size_t count : kCounts) {
    for (const size_t body : {size_t{1}, size_t{1000}, size_t{4096}, count + 5}) {
      const BucketPlan plan = plan_buckets(count, {body * sizeof(float), 0, 0});
      expect_partition(plan, count);
      ASSERT_EQ(plan.size(), (count + body - 1) / body) << count << " elements, body " << body;
      for (size_t i = 0; i < plan.size(); ++i) {
        EXPECT_EQ(plan.cuts[i], i * body);  // the cuts of the equal buckets before plans existed
        EXPECT_EQ(plan.reported[i], elements(plan, i)) << "without ranges every element is reported";
      }
    }
  }
}

TEST(BucketPlan, SmallTailAndFirstBucket) {
  const size_t body = 4096, tail = 300, first = 100;
  for (const size_t count : kCounts) {
    for (const bool with_first : {false, true}) {
      const BucketPlan plan = plan_buckets(count, {body * 4, tail * 4, with_first ? first * 4 : 0});
      expect_partition(plan, count);
      if (count <= tail) {
        EXPECT_EQ(plan.size(), count == 0 ? 0u : 1u) << "a tail bigger than the buffer is the whole buffer";
        continue;
      }
      EXPECT_EQ(elements(plan, plan.size() - 1), tail) << count << " elements";
      if (with_first && count > first + tail) {
        EXPECT_EQ(elements(plan, 0), first);
      }
      for (size_t i = 0; i < plan.size(); ++i) EXPECT_LE(elements(plan, i), body) << "bucket " << i;
      // The body buckets are full but the last one before the tail.
      for (size_t i = with_first ? 1 : 0; i + 2 < plan.size(); ++i) EXPECT_EQ(elements(plan, i), body);
    }
  }
}

TEST(BucketPlan, TailAsLargeAsTheBodyAndTailOverTheBuffer) {
  const size_t count = 7919, body = 1000;
  const BucketPlan same = plan_buckets(count, {body * 4, body * 4});
  expect_partition(same, count);
  EXPECT_EQ(elements(same, same.size() - 1), body);
  EXPECT_EQ(same.size(), 8u);  // six of 1000, 919, the tail of 1000
  const BucketPlan over = plan_buckets(count, {body * 4, (count + 1) * 4, 100 * 4});
  expect_partition(over, count);
  EXPECT_EQ(over.size(), 1u) << "a tail bigger than the buffer leaves room for nothing else";
  EXPECT_THROW(plan_buckets(count, {3, 0}), runtime::UsageError);
  EXPECT_THROW(bucket_sizes_mib(0, 1, 0), runtime::UsageError);
}

// Parameters as a ParameterSet lays them out: random sizes, each starting at a multiple of 64.
std::vector<GradientRange> random_layout(std::mt19937_64& rng, size_t target, size_t* count) {
  std::vector<GradientRange> ranges;
  size_t at = 0;
  while (at < target) {
    at = (at + 63) / 64 * 64;
    const size_t numel = rng() % 8 == 0 ? 1 + rng() % 20000 : 1 + rng() % 700;
    ranges.push_back({at, at + numel});
    at += numel;
  }
  *count = at;
  std::shuffle(ranges.begin(), ranges.end(), rng);  // any order
  return ranges;
}

TEST(BucketPlan, CutsAtParameterBoundariesAndCountsWhatBackwardReports) {
  const uint64_t seed = test::random_seed();
  std::mt19937_64 rng(seed);
  for (const size_t target : {size_t{1}, size_t{7919}, (size_t{1} << 20) + 3}) {
    size_t count = 0;
    const std::vector<GradientRange> ranges = random_layout(rng, target, &count);
    const size_t body = 4096, tail = 1024, first = 512;
    const BucketPlan plan = plan_buckets(count, {body * 4, tail * 4, first * 4}, ranges);
    expect_partition(plan, count);
    std::vector<size_t> begins;
    size_t reported = 0;
    for (const GradientRange& r : ranges) begins.push_back(r.begin), reported += r.end - r.begin;
    size_t summed = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      summed += plan.reported[i];
      EXPECT_LE(elements(plan, i), body + body / 8) << "bucket " << i << ", seed " << seed;
    }
    EXPECT_EQ(summed, reported) << "the alignment gaps are not counted; seed " << seed;
    if (count <= 2 * body) continue;
    const size_t n = plan.size();
    EXPECT_LE(elements(plan, n - 1), tail + tail / 8) << "seed " << seed;
    // A cut is where a parameter begins, or no parameter begins within its slack (an eighth of
    // its bucket) inside the two buckets it separates. The cut before the tail's is left out: it
    // may not move past where the tail was to begin.
    size_t moved = 0;
    for (size_t i = 1; i < n; ++i) {
      const size_t c = plan.cuts[i];
      if (std::count(begins.begin(), begins.end(), c) > 0) {
        ++moved;
        continue;
      }
      if (i == n - 2) continue;
      const size_t slack = (i == n - 1 ? tail : i == 1 ? first : body) / 8;
      for (const size_t b : begins) {
        const size_t distance = b > c ? b - c : c - b;
        EXPECT_FALSE(b > plan.cuts[i - 1] && b < plan.cuts[i + 1] && distance <= slack)
            << "cut " << i << " at " << c << " with a parameter beginning at " << b << "; seed " << seed;
      }
    }
    if (n > 20) {
      EXPECT_GT(moved, n / 10) << "seed " << seed;
    }
  }
}

TEST(BucketPlan, BackwardOrderLaunchesEveryBucketDuringBackwardAndTheSmallTailLast) {
  const uint64_t seed = test::random_seed();
  std::mt19937_64 rng(seed);
  size_t count = 0;
  std::vector<GradientRange> ranges = random_layout(rng, (size_t{1} << 20) + 3, &count);
  std::sort(ranges.begin(), ranges.end(), [](const GradientRange& a, const GradientRange& b) {
    return a.begin < b.begin;  // backward writes the buffer front to back
  });
  const size_t tail = 2048;
  GradientBuckets buckets(plan_buckets(count, {65536 * 4, tail * 4, 1024 * 4}, ranges));
  ASSERT_GE(buckets.size(), 3u);
  for (int step = 0; step < 2; ++step) {
    std::vector<size_t> order;
    buckets.begin_step();
    for (const GradientRange& r : ranges) buckets.mark_ready(r.begin, r.end, [&](size_t i) { order.push_back(i); });
    EXPECT_EQ(buckets.launched_during_backward(), static_cast<int>(buckets.size()))
        << "a bucket waited for its alignment gaps; seed " << seed;
    buckets.finish_step([&](size_t i) { order.push_back(i); });
    ASSERT_EQ(order.size(), buckets.size());
    for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i) << "seed " << seed;
    const size_t last = order.back();
    EXPECT_EQ(buckets.end(last), count);
    EXPECT_LE(buckets.end(last) - buckets.begin(last), tail + tail / 8) << "seed " << seed;
  }
}

TEST(BucketPlan, WithoutRangesTheGapsHoldBucketsUntilFinish) {
  // Two parameters with a gap between them: a plan that knows nothing of them waits for the gap.
  const std::vector<GradientRange> ranges = {{0, 1000}, {1024, 3000}};
  GradientBuckets blind(plan_buckets(3000, {4096 * 4, 0}));
  GradientBuckets told(plan_buckets(3000, {4096 * 4, 0}, ranges));
  for (GradientBuckets* b : {&blind, &told}) {
    b->begin_step();
    for (const GradientRange& r : ranges) b->mark_ready(r.begin, r.end, [](size_t) {});
    b->finish_step([](size_t) {});
  }
  EXPECT_EQ(blind.launched_during_backward(), 0);
  EXPECT_EQ(told.launched_during_backward(), 1);
  EXPECT_THROW(plan_buckets(3000, {4096, 0}, std::vector<GradientRange>{{0, 10}, {5, 20}}), runtime::Error);
  EXPECT_THROW(plan_buckets(3000, {4096, 0}, std::vector<GradientRange>{{2990, 3001}}), runtime::Error);
}

}  // namespace
}  // namespace dtrain::comm
