// The mpi-ring's lanes (ring_lanes.h: a large host all-reduce cut into one part per lane, the
// parts on rings side by side, each on its own thread and communicator) against references on 1
// to 4 ranks: fp32 sum (in and out of place) and average, and the 16-bit-partials ring that the
// cross-node wire takes (sum and average), with 1 to 3 lanes and counts around the size where
// lanes start (1 MiB a lane) that split unevenly; each call must take the lanes exactly when it
// is that large. On small integers every partial sum is exact in fp32 and bf16, so any order of
// summation gives the exact sum; on random values in [-1, 1] the sum is within its roundings and
// must be the same bits on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/backends/mpi_ring_communicator.h"
#include "runtime/memory/dtype.h"
#include "tests/comm/collective_reference.h"
#include "tests/support/mpi_world.h"

namespace dtrain::comm {
namespace {

using test::world_rank;
using test::world_size;

// Integers in [-8, 8] for (seed, rank): with 4 ranks every partial sum is within [-32, 32], exact
// in bf16's 8 significant bits.
std::vector<float> small_integers(uint64_t seed, int rank, size_t count) {
  std::mt19937_64 rng(seed ^ (uint64_t(rank + 1) * 0x9E3779B97F4A7C15ull));
  std::uniform_int_distribution<int> dist(-8, 8);
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(dist(rng));
  return values;
}

// Whether every rank holds the same `bytes`: FNV-1a hashes compared by min and max.
bool same_on_every_rank(const void* data, size_t bytes) {
  uint64_t hash = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  uint64_t low = hash, high = hash;
  MPI_Allreduce(MPI_IN_PLACE, &low, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &high, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return low == high;
}

RingTuning with_lanes(int lanes) {
  RingTuning tuning;
  tuning.lanes = lanes;
  tuning.shm = false;  // the ranks share a host here: keep fp32 all-reduces on the rings
  return tuning;
}

// Counts in elements of `esize` bytes: below the lanes' threshold, at it, and past it by amounts
// that split unevenly over lanes and ranks.
std::vector<size_t> counts_around_lanes(int lanes, size_t esize) {
  const size_t threshold = (static_cast<size_t>(lanes) << 20) / esize;
  return {threshold - 1, threshold, threshold + 7, threshold + 7919, 2 * threshold + 3};
}

class RingLanesTest : public testing::TestWithParam<int> {};

// Whether an all-reduce of `bytes` should take the lanes: as MpiRingCommunicator::takes_lanes.
bool expects_lanes(int lanes, size_t bytes) {
  return lanes > 1 && world_size() > 1 && bytes >= (static_cast<size_t>(lanes) << 20);
}

TEST_P(RingLanesTest, Fp32SumAndAverageMatchTheReference) {
  const int lanes = GetParam();
  MpiRingCommunicator ring(MPI_COMM_WORLD, with_lanes(lanes));
  Communicator& comm = ring;
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  const int size = world_size();
  for (size_t count : counts_around_lanes(lanes, sizeof(float))) {
    for (bool integers : {true, false}) {
      std::vector<double> exact(count, 0.0), magnitude(count, 0.0);
      std::vector<float> mine;
      for (int r = 0; r < size; ++r) {
        std::vector<float> v;
        if (integers) {
          v = small_integers(seed, r, count);
        } else {
          const std::vector<double> d = test::random_values(seed, r, 3, count, DType::kF32);
          v.assign(d.begin(), d.end());
        }
        for (size_t i = 0; i < count; ++i) {
          exact[i] += v[i];
          magnitude[i] += std::fabs(v[i]);
        }
        if (r == world_rank()) mine = v;
      }
      for (int variant = 0; variant < 3; ++variant) {  // sum out of place, sum in place, average
        const ReduceOp op = variant == 2 ? ReduceOp::kAverage : ReduceOp::kSum;
        std::vector<float> out = variant == 1 ? mine : std::vector<float>(count, NAN);
        const long runs_before = ring.lane_runs();
        comm.all_reduce(variant == 1 ? out.data() : mine.data(), out.data(), count, DType::kF32, op).wait();
        const std::string what = std::to_string(lanes) + " lanes, " + std::to_string(size) + " ranks, count " +
                                 std::to_string(count) + (integers ? ", integers, " : ", random, ") +
                                 (variant == 0   ? "sum"
                                  : variant == 1 ? "sum in place"
                                                 : "average");
        EXPECT_EQ(ring.lane_runs() - runs_before, expects_lanes(lanes, count * sizeof(float)) ? 1 : 0) << what;
        const double scale = op == ReduceOp::kSum ? 1.0 : 1.0 / size;
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < count; ++i) {
          // Integers: exact, then the average's one scaling in fp32. Random values: n - 1 additions
          // in fp32 (unit roundoff 2^-24) in some order, then the scaling.
          const double want = exact[i] * scale;
          const double sums = integers ? 0.0 : (size - 1) * std::ldexp(magnitude[i], -24);
          const double bound = scale * sums + std::ldexp(std::fabs(want), -23);
          if (!(std::fabs(out[i] - want) <= bound) && wrong++ == 0) first = i;
        }
        EXPECT_EQ(wrong, 0u) << what << ": first wrong at " << first << ", got " << out[first] << ", want "
                             << exact[first] * scale;
        EXPECT_TRUE(same_on_every_rank(out.data(), count * sizeof(float))) << what;
      }
    }
  }
}

TEST_P(RingLanesTest, SixteenBitPartialsSumExactlyAndAverageWithinARounding) {
  const int lanes = GetParam();
  MpiRingCommunicator ring(MPI_COMM_WORLD, with_lanes(lanes), MpiRingCommunicator::Sixteen::kPartials);
  Communicator& comm = ring;
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  const int size = world_size();
  for (size_t count : counts_around_lanes(lanes, sizeof(runtime::bfloat16))) {
    std::vector<double> exact(count, 0.0);
    std::vector<runtime::bfloat16> mine(count);
    for (int r = 0; r < size; ++r) {
      const std::vector<float> v = small_integers(seed, r, count);
      for (size_t i = 0; i < count; ++i) exact[i] += v[i];
      if (r == world_rank()) {
        for (size_t i = 0; i < count; ++i) mine[i] = runtime::to_bfloat16(v[i]);
      }
    }
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      std::vector<runtime::bfloat16> data = mine;
      const long runs_before = ring.lane_runs();
      comm.all_reduce(data.data(), data.data(), count, DType::kBF16, op).wait();
      const std::string what = std::to_string(lanes) + " lanes, " + std::to_string(size) + " ranks, bf16, count " +
                               std::to_string(count) + (op == ReduceOp::kSum ? ", sum" : ", average");
      // One rank (nothing to add) takes the widened path, which never takes the lanes.
      EXPECT_EQ(ring.lane_runs() - runs_before, expects_lanes(lanes, count * sizeof(runtime::bfloat16)) ? 1 : 0)
          << what;
      size_t wrong = 0, first = 0;
      for (size_t i = 0; i < count; ++i) {
        // The sum is exact; the average is the exact sum scaled and rounded once to bf16.
        const double want = op == ReduceOp::kSum ? exact[i] : exact[i] / size;
        const double bound =
            op == ReduceOp::kSum ? 0.0 : std::ldexp(std::fabs(want), -8) + std::ldexp(std::fabs(want), -22);
        if (!(std::fabs(static_cast<double>(runtime::to_float(data[i])) - want) <= bound) && wrong++ == 0) first = i;
      }
      EXPECT_EQ(wrong, 0u) << what << ": first wrong at " << first << ", got " << runtime::to_float(data[first])
                           << ", want " << (op == ReduceOp::kSum ? exact[first] : exact[first] / size);
      EXPECT_TRUE(same_on_every_rank(data.data(), count * sizeof(runtime::bfloat16))) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Lanes, RingLanesTest, testing::Values(1, 2, 3),
                         [](const testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "_lanes"; });

}  // namespace
}  // namespace dtrain::comm
