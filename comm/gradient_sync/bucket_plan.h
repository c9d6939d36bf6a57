#pragma once
// Where the flat fp32 gradient buffer is cut into buckets, decided once per synchronizer and
// identical on every rank (the sizes and the layout are; the first step's consistency check
// proves the all-reduces agree).
//
// Backward writes the buffer front to back (models/parameter_set.h), so the bucket at the end is
// the one backward completes last: its all-reduce cannot overlap backward, and its whole time is
// step tail. BucketSizes makes that one small (tail_bytes, like DDP's small bucket but at the end
// that matters), optionally the first one too (first_bytes: communication starts early), and the
// body in between of body_bytes (the last body bucket takes the remainder, so it may be shorter).
// A size of 0 for tail or first: no special bucket there (tail 0 and first 0: equal buckets).
//
// Given the gradient ranges of the parameters (each reported whole by backward), plan_buckets
// moves a cut to the nearest parameter boundary within an eighth of its bucket's size: a bucket
// that ends mid-tensor waits for the whole tensor anyway. Larger tensors are still cut inside.
// It also counts, per bucket, the elements backward reports, so the alignment gaps between
// parameters (never reported) do not hold a bucket back until finish(). Without ranges every
// element counts as reported and the cuts fall at the sizes.
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "comm/gradient_sync/gradient_sync.h"

namespace dtrain::comm {

struct BucketSizes {
  size_t body_bytes = size_t{kDefaultBucketMib} << 20;
  size_t tail_bytes = size_t{kDefaultTailBucketMib} << 20;  // the end of the buffer: backward's last
  size_t first_bytes = 0;                                   // the start of the buffer: backward's first
};

// The sizes of a config's MiB fields (0 for tail or first: none).
BucketSizes bucket_sizes_mib(int body_mib, int tail_mib, int first_mib);

// One parameter's gradient in the flat buffer: [begin, end) elements.
struct GradientRange {
  size_t begin = 0, end = 0;
};

struct BucketPlan {
  std::vector<size_t> cuts;      // size() + 1 ascending positions, from 0 to the element count
  std::vector<size_t> reported;  // per bucket: the elements backward reports
  size_t size() const { return cuts.empty() ? 0 : cuts.size() - 1; }
};

// The plan for [0, count) fp32 elements. ranges: the parameters' gradients, disjoint, inside the
// buffer, in any order; empty: unknown. A UsageError for a body of less than one element.
BucketPlan plan_buckets(size_t count, const BucketSizes& sizes, std::span<const GradientRange> ranges = {});

// For the log: "K gradient bucket(s) of up to B MiB" and, with more than one, the special ones,
// e.g. "7 gradient bucket(s) of up to 25 MiB, the last (backward's final one) 1 MiB".
std::string describe_buckets(size_t buckets, const BucketSizes& sizes);

}  // namespace dtrain::comm
