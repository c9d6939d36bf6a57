// The gradient synchronizer on 1-4 ranks: buckets launch as soon as they are complete, and after
// finish() every rank holds the average, exactly for fp32 (a fixed reduction order) and within one
// rounding for the 16-bit wire formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
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
  const size_t count = 250007;                                     // 4 buckets of 64 K elements plus a short one
  GradientSynchronizer sync(comm, nullptr, 0, 1024, DType::kF32);  // an empty model is fine too
  sync.begin_step();
  sync.finish();

  std::vector<float> grads(count);
  GradientSynchronizer synchronizer(comm, grads.data(), count, 256 * 1024, wire);
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
  GradientSynchronizer synchronizer(comm, grads.data(), grads.size(), 64, GetParam());
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
  GradientSynchronizer synchronizer(comm, grads.data(), count, 256 * 1024, wire);
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
  GradientSynchronizer synchronizer(*b.comm, grads.data(), count, 1024 * sizeof(float), DType::kF32);
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
