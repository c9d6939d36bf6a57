// The mpi-ring's lanes (ring_lanes.h: a large host all-reduce cut into one part per lane, the
// parts on rings side by side, each on its own thread and communicator) against exact references
// on 1 to 4 ranks: fp32 sum and average, and the 16-bit-partials ring that the cross-node wire
// takes, with 1 to 3 lanes and counts around the size where lanes start (1 MiB a lane) that split
// unevenly. The values are small integers, so every partial sum is exact in fp32 and bf16 and any
// order of summation gives the exact sum; averages are within one rounding of it. Every rank must
// end with the same bits.
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

TEST_P(RingLanesTest, Fp32SumAndAverageMatchTheExactReference) {
  const int lanes = GetParam();
  MpiRingCommunicator ring(MPI_COMM_WORLD, with_lanes(lanes));
  Communicator& comm = ring;
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  const int size = world_size();
  for (size_t count : counts_around_lanes(lanes, sizeof(float))) {
    std::vector<double> exact(count, 0.0);
    std::vector<float> mine;
    for (int r = 0; r < size; ++r) {
      const std::vector<float> v = small_integers(seed, r, count);
      for (size_t i = 0; i < count; ++i) exact[i] += v[i];
      if (r == world_rank()) mine = v;
    }
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      std::vector<float> out(count, NAN);
      comm.all_reduce(mine.data(), out.data(), count, DType::kF32, op).wait();
      const std::string what = std::to_string(lanes) + " lanes, " + std::to_string(size) + " ranks, count " +
                               std::to_string(count) + (op == ReduceOp::kSum ? ", sum" : ", average");
      size_t wrong = 0, first = 0;
      for (size_t i = 0; i < count; ++i) {
        // The average scales the exact sum once in fp32: within half an fp32 unit of the quotient.
        const double want = op == ReduceOp::kSum ? exact[i] : exact[i] / size;
        const double bound = op == ReduceOp::kSum ? 0.0 : std::ldexp(std::fabs(want), -23);
        if (!(std::fabs(out[i] - want) <= bound) && wrong++ == 0) first = i;
      }
      EXPECT_EQ(wrong, 0u) << what << ": first wrong at " << first << ", got " << out[first] << ", want "
                           << (op == ReduceOp::kSum ? exact[first] : exact[first] / size);
      EXPECT_TRUE(same_on_every_rank(out.data(), count * sizeof(float))) << what;
    }
  }
}

TEST_P(RingLanesTest, SixteenBitPartialsSumExactly) {
  const int lanes = GetParam();
  MpiRingCommunicator ring(MPI_COMM_WORLD, with_lanes(lanes), MpiRingCommunicator::Sixteen::kPartials);
  Communicator& comm = ring;
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  const int size = world_size();
  for (size_t count : counts_around_lanes(lanes, sizeof(runtime::bfloat16))) {
    std::vector<double> exact(count, 0.0);
    std::vector<runtime::bfloat16> data(count);
    for (int r = 0; r < size; ++r) {
      const std::vector<float> v = small_integers(seed, r, count);
      for (size_t i = 0; i < count; ++i) exact[i] += v[i];
      if (r == world_rank()) {
        for (size_t i = 0; i < count; ++i) data[i] = runtime::to_bfloat16(v[i]);
      }
    }
    comm.all_reduce(data.data(), data.data(), count, DType::kBF16, ReduceOp::kSum).wait();
    const std::string what = std::to_string(lanes) + " lanes, " + std::to_string(size) + " ranks, bf16, count " +
                             std::to_string(count);
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < count; ++i) {
      if (static_cast<double>(runtime::to_float(data[i])) != exact[i] && wrong++ == 0) first = i;
    }
    EXPECT_EQ(wrong, 0u) << what << ": first wrong at " << first << ", got " << runtime::to_float(data[first])
                         << ", want " << exact[first];
    EXPECT_TRUE(same_on_every_rank(data.data(), count * sizeof(runtime::bfloat16))) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Lanes, RingLanesTest, testing::Values(1, 2, 3),
                         [](const testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "_lanes"; });

}  // namespace
}  // namespace dtrain::comm
