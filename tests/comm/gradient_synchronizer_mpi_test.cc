// The gradient synchronizer on 1-4 ranks: buckets launch as soon as they are complete, and after
// finish() every rank holds the average, exactly for fp32 (a fixed reduction order) and within one
// rounding for the 16-bit wire formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "comm/backends/mpi_ring_communicator.h"
#include "comm/gradient_sync/gradient_synchronizer.h"
#include "runtime/base/error.h"
#include "runtime/base/steady_seconds.h"
#include "runtime/io/fingerprint.h"
#include "runtime/memory/dtype.h"
#include "runtime/mpi/mpi_agreement.h"
#include "tests/comm/collective_reference.h"
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

INSTANTIATE_TEST_SUITE_P(WireFormats, Synchronizer, testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const testing::TestParamInfo<DType>& p) {
                           return std::string(runtime::dtype_name(p.param));
                         });

}  // namespace
}  // namespace dtrain::comm
