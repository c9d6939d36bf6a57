// The gradient synchronizer on 1-4 ranks: buckets launch as soon as they are complete, and after
// finish() every rank holds the average, exactly for fp32 (a fixed reduction order) and within one
// rounding for the 16-bit wire formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "comm/backends/mpi_ring_communicator.h"
#include "comm/gradient_sync/gradient_synchronizer.h"
#include "runtime/base/error.h"
#include "runtime/base/steady_seconds.h"
#include "runtime/io/fingerprint.h"
#include "runtime/memory/dtype.h"
#include "runtime/mpi/mpi_agreement.h"
#include "tests/comm/collective_reference.h"
#include "tests/comm/test_backends.h"
#include "tests/support/mpi_world.h"

namespace dtrain::comm {
namespace {

using test::world_rank;
using test::world_size;

class Synchronizer : public testing::TestWithParam<DType> {};

TEST_P(Synchronizer, AveragesAllBucketsAndOverlapsBackward) {
  const DType wire = GetParam();
  MpiRingCommunicator comm(MPI_COMM_WORLD, RingTuning{});
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  const size_t count = 250007;  // 4 buckets of 64 K elements plus a short one
  GradientSynchronizer sync(comm, nullptr, plan_buckets(0, {1024, 0}), DType::kF32);  // an empty model is fine too
  sync.begin_step();
  sync.finish();

  std::vector<float> grads(count);
  GradientSynchronizer synchronizer(comm, grads.data(), plan_buckets(count, {256 * 1024, 0}), wire);
  ASSERT_EQ(synchronizer.bucket_count(), 4u);
  for (int step = 0; step < 2; ++step) {
    std::vector<double> mean(count, 0.0);
    for (int r = 0; r < world_size(); ++r) {
      const auto v = test::random_values(seed + step, r, 0, count, DType::kBF16);
      for (size_t i = 0; i < count; ++i) mean[i] += v[i] / world_size();
      if (r == world_rank()) std::copy(v.begin(), v.end(), grads.begin());
    }
    synchronizer.begin_step();
    // Backward reports ranges front to back, in uneven pieces that straddle bucket boundaries.
    size_t at = 0;
    for (size_t piece = 1; at < count; piece = piece * 3 + 1) {
      const size_t end = std::min(count, at + piece);
      synchronizer.mark_ready(at, end);
      at = end;
    }
    EXPECT_EQ(synchronizer.launched_during_backward(), 4);
    synchronizer.finish();
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!(std::fabs(grads[i] - mean[i]) <= test::tolerance(mean[i], 1.0, wire))) ++wrong;
    }
    EXPECT_EQ(wrong, 0u) << runtime::dtype_name(wire) << " step " << step;
    EXPECT_TRUE(runtime::same_on_every_rank(MPI_COMM_WORLD, runtime::fingerprint(grads.data(), count * 4)));
  }
}

TEST_P(Synchronizer, RejectsDoubleReports) {
  MpiRingCommunicator comm(MPI_COMM_WORLD, RingTuning{});
  std::vector<float> grads(100, 1.0f);
  GradientSynchronizer synchronizer(comm, grads.data(), plan_buckets(grads.size(), {64, 0}), GetParam());
  synchronizer.begin_step();
  synchronizer.mark_ready(0, 10);
  EXPECT_THROW(synchronizer.mark_ready(5, 12), runtime::Error);
  synchronizer.mark_ready(10, 100);
  synchronizer.finish();
  EXPECT_EQ(grads[99], 1.0f);
}

// The timeline's buckets: each bucket's span is when its all-reduce ran on the worker,
// inside the step, in bucket order, with the bytes it moved in the wire format.
TEST_P(Synchronizer, BucketSpansAreWhenTheAllReducesRan) {
  const DType wire = GetParam();
  MpiRingCommunicator comm(MPI_COMM_WORLD, RingTuning{});
  const size_t count = 250007;
  std::vector<float> grads(count, 1.0f);
  GradientSynchronizer synchronizer(comm, grads.data(), plan_buckets(count, {256 * 1024, 0}), wire);
  const auto now = runtime::steady_seconds;
  const double began = now();
  synchronizer.begin_step();
  synchronizer.mark_ready(0, count);
  synchronizer.finish();
  const double finished = now();
  const std::vector<GradientSynchronizer::BucketSpan> spans = synchronizer.bucket_spans();
  ASSERT_EQ(spans.size(), 4u);
  size_t elements = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].bucket, i);
    EXPECT_LE(began, spans[i].begin) << "bucket " << i;
    EXPECT_LE(spans[i].begin, spans[i].end) << "bucket " << i;
    EXPECT_LE(spans[i].end, finished) << "bucket " << i;
    if (i > 0) {
      EXPECT_LE(spans[i - 1].end, spans[i].begin) << "the worker runs them one after the other";
    }
    elements += spans[i].bytes / runtime::dtype_size(wire);
  }
  EXPECT_EQ(elements, count);
}

// Parameters laid out as a ParameterSet does (each at a multiple of 64, gaps between), the same on
// every rank: drawn from the shared seed.
std::vector<GradientRange> parameter_layout(uint64_t seed, size_t target, size_t* count) {
  std::mt19937_64 rng(seed);
  std::vector<GradientRange> ranges;
  size_t at = 0;
  while (at < target) {
    at = (at + 63) / 64 * 64;
    const size_t numel = 1 + rng() % (rng() % 8 == 0 ? 70000 : 3000);
    ranges.push_back({at, at + numel});
    at += numel;
  }
  *count = at;
  return ranges;
}

// The plans (equal buckets, a small tail and first bucket, cut at parameter boundaries) average
// alike: each within the float64 tolerance, and, on 1-2 ranks, bit for bit as equal buckets do (a
// sum of two is the same in either order; with more ranks the ring's chain for an element starts
// where the element falls in its bucket's chunks, so the rounding may differ). With the layout,
// every bucket starts during backward, the gaps (never reported) notwithstanding.
TEST_P(Synchronizer, BucketPlansAverageAlike) {
  const DType wire = GetParam();
  MpiRingCommunicator comm(MPI_COMM_WORLD, RingTuning{});
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  size_t count = 0;
  const std::vector<GradientRange> ranges = parameter_layout(seed, (size_t{1} << 20) + 3, &count);
  std::vector<double> mean(count, 0.0);
  std::vector<float> mine(count, 0.0f);
  for (int r = 0; r < world_size(); ++r) {
    const auto v = test::random_values(seed, r, 1, count, DType::kBF16);
    for (const GradientRange& g : ranges) {
      for (size_t i = g.begin; i < g.end; ++i) {
        mean[i] += v[i] / world_size();
        if (r == world_rank()) mine[i] = static_cast<float>(v[i]);
      }
    }
  }
  const BucketSizes equal{256 * 1024, 0}, shaped{256 * 1024, 16 * 1024, 8 * 1024};
  const BucketPlan plans[] = {plan_buckets(count, equal), plan_buckets(count, shaped),
                              plan_buckets(count, shaped, ranges)};
  std::vector<float> first_result;
  for (size_t p = 0; p < std::size(plans); ++p) {
    std::vector<float> grads = mine;
    GradientSynchronizer synchronizer(comm, grads.data(), plans[p], wire);
    synchronizer.begin_step();
    for (const GradientRange& g : ranges) synchronizer.mark_ready(g.begin, g.end);  // backward order
    if (p == 2) {
      EXPECT_EQ(synchronizer.launched_during_backward(), static_cast<int>(synchronizer.bucket_count()));
    }
    synchronizer.finish();
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!(std::fabs(grads[i] - mean[i]) <= test::tolerance(mean[i], 1.0, wire))) ++wrong;
    }
    EXPECT_EQ(wrong, 0u) << "plan " << p << " of " << plans[p].size() << " buckets";
    EXPECT_TRUE(runtime::same_on_every_rank(MPI_COMM_WORLD, runtime::fingerprint(grads.data(), count * 4)));
    if (p == 0) first_result = grads;
    if (world_size() <= 2) {
      EXPECT_TRUE(grads == first_result) << "plan " << p << " differs from equal buckets";
    }
  }
}

// The hierarchical backend's phases inside each bucket (comm/call_trace.h), with phase timing on:
// nodes of 2 ranks, so 1 rank is one node alone (the cross-node ring only), 2 and 4 are equal
// nodes (reduce-scatter, ring, all-gather) and 3 is a node of 2 and one of 1 (all-reduce, ring,
// broadcast). Each phase once, inside its bucket's span, in that order, with its bytes; the
// average is exact (small integers). Phase timing off: no phases.
TEST(SynchronizerPhases, HierarchicalBucketsReportTheirPhasesInOrder) {
  test::Backend b = test::make_backend({"hierarchical", 2, false});
  const runtime::Topology& t = b.ctx->topology();
  const bool uniform = t.world_size % 2 == 0 || t.world_size == 1;
  const size_t count = 7919;  // 3 buckets of 1 KiB and a remainder: odd shards, padding
  const uint32_t seed = std::random_device{}();
  uint32_t seed0 = seed;
  MPI_Bcast(&seed0, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
  std::printf("seed %u\n", seed0);
  std::vector<int> values(count * static_cast<size_t>(t.world_size));
  std::mt19937 rng(seed0);
  for (int& v : values) v = static_cast<int>(rng() % 17) - 8;
  std::vector<float> grads(count);
  for (size_t i = 0; i < count; ++i) grads[i] = static_cast<float>(values[i * t.world_size + t.world_rank]);
  GradientSynchronizer synchronizer(*b.comm, grads.data(), plan_buckets(count, BucketSizes{1024 * sizeof(float), 0}),
                                    DType::kF32);
  for (const bool timed : {true, false}) {
    synchronizer.set_phase_timing(timed);
    synchronizer.begin_step();
    synchronizer.mark_ready(0, count);
    synchronizer.finish();
    for (const GradientSynchronizer::BucketSpan& s : synchronizer.bucket_spans()) {
      const std::string where = "bucket " + std::to_string(s.bucket) + (timed ? "" : " untimed");
      if (!timed) {
        EXPECT_TRUE(s.phases.empty()) << where;
        continue;
      }
      const size_t n = s.bytes / sizeof(float);
      const size_t local = static_cast<size_t>(t.local_size);
      const size_t shard = (n + local - 1) / local;
      std::vector<std::pair<const char*, size_t>> expected;
      if (!uniform) {
        expected = {{kPhaseIntraAllReduce, n}, {kPhaseCrossNode, 0}, {kPhaseIntraBroadcast, n}};
      } else if (local == 1) {
        expected = {{kPhaseCrossNode, n}};
      } else {
        expected = {
            {kPhaseIntraReduceScatter, shard * local}, {kPhaseCrossNode, shard}, {kPhaseIntraAllGather, shard * local}};
      }
      ASSERT_EQ(s.phases.size(), expected.size()) << where;
      double previous_end = s.begin;
      for (size_t i = 0; i < expected.size(); ++i) {
        const CallPhase& p = s.phases[i];
        EXPECT_STREQ(p.name, expected[i].first) << where;
        if (expected[i].second > 0) {
          EXPECT_EQ(p.bytes, static_cast<int64_t>(expected[i].second * 4)) << where;
        }
        EXPECT_EQ(p.piece, -1) << where;
        EXPECT_LE(previous_end, p.begin) << where << ": " << p.name;
        EXPECT_LE(p.begin, p.end) << where << ": " << p.name;
        previous_end = p.end;
      }
      EXPECT_LE(previous_end, s.end) << where;
    }
    for (size_t i = 0; i < count; ++i) {
      int sum = 0;
      for (int r = 0; r < t.world_size; ++r) sum += values[i * t.world_size + r];
      // The backend scales the exact sum by the fp32 reciprocal of the world size.
      ASSERT_EQ(grads[i], static_cast<float>(sum) * (1.0f / static_cast<float>(t.world_size))) << "element " << i;
      grads[i] = static_cast<float>(values[i * t.world_size + t.world_rank]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WireFormats, Synchronizer, testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const testing::TestParamInfo<DType>& p) {
                           return std::string(runtime::dtype_name(p.param));
                         });

}  // namespace
}  // namespace dtrain::comm
