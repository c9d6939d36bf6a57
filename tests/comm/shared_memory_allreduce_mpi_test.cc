// The shared-memory all-reduce (comm/host/shared_memory_allreduce.h), on its own and as the
// mpi-ring's path for host all-reduces, under mpirun with 1 to 4 ranks: every element must equal,
// bit for bit, the fp32 sum in rank order 0..n-1 times the scale (rounded once to 16 bits for bf16
// and fp16), on fresh random inputs (seed printed), in place and not, sum and average, at awkward
// counts and at counts spanning several chunks with a ragged last one; every rank holds the same
// bits; nothing is written past the end.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/backends/mpi_ring_communicator.h"
#include "comm/host/shared_memory_allreduce.h"
#include "runtime/io/fingerprint.h"
#include "runtime/mpi/mpi_agreement.h"
#include "runtime/rank/rank_context.h"
#include "tests/comm/collective_reference.h"
#include "tests/comm/watchdog.h"
#include "tests/support/mpi_world.h"

namespace dtrain::comm {
namespace {

using test::world_rank;
using test::world_size;

constexpr size_t kChunkBytes = 64 * 1024;  // small chunks: many of them at moderate counts
constexpr size_t kChunkFloats = kChunkBytes / sizeof(float);

std::vector<size_t> counts() {
  return {0, 1, 7, 7919, 5 * kChunkFloats + 1001, (size_t{1} << 20) + 3};
}

// Rank r's input: values in [-1, 1] exact in `dtype`, as floats.
std::vector<float> input(uint64_t seed, int r, size_t count, DType dtype) {
  const std::vector<double> v = test::random_values(seed, r, static_cast<int>(count % 100000), count, dtype);
  return std::vector<float>(v.begin(), v.end());
}

// The fp32 chain in rank order, times the scale: what every rank must hold.
std::vector<float> rank_order_sum(uint64_t seed, size_t count, float scale, DType dtype) {
  std::vector<float> sum = input(seed, 0, count, dtype);
  for (int r = 1; r < world_size(); ++r) {
    const std::vector<float> v = input(seed, r, count, dtype);
    for (size_t i = 0; i < count; ++i) sum[i] = sum[i] + v[i];
  }
  for (float& x : sum) x = x * scale;
  return sum;
}

// The first element whose bytes differ, or `count` when none does.
size_t first_difference(const unsigned char* got, const unsigned char* want, size_t count, size_t esize) {
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(got + i * esize, want + i * esize, esize) != 0) return i;
  }
  return count;
}

std::string label(const char* what, DType dtype, bool average, bool in_place, size_t count) {
  return std::string(what) + " " + runtime::dtype_name(dtype) + (average ? " average" : " sum") +
         (in_place ? " in-place" : "") + " count=" + std::to_string(count) + " ranks=" + std::to_string(world_size());
}

// Runs all_reduce(send, recv, count, dtype, average) over every case and checks the bits.
template <typename AllReduce>
void check_every_case(const char* what, DType dtype, uint64_t seed, AllReduce all_reduce) {
  const size_t esize = runtime::dtype_size(dtype);
  for (bool average : {false, true}) {
    for (bool in_place : {false, true}) {
      for (size_t count : counts()) {
        const std::string name = label(what, dtype, average, in_place, count);
        const float scale = average ? 1.0f / static_cast<float>(world_size()) : 1.0f;
        const std::vector<float> values = input(seed, world_rank(), count, dtype);
        const std::vector<unsigned char> mine = test::encode(std::vector<double>(values.begin(), values.end()), dtype);
        const std::vector<float> sum = rank_order_sum(seed, count, scale, dtype);
        const std::vector<unsigned char> want = test::encode(std::vector<double>(sum.begin(), sum.end()), dtype);
        std::vector<unsigned char> out(count * esize + 1, 0xEE);  // +1: a guard byte
        const unsigned char* send = mine.data();
        if (in_place) {
          std::memcpy(out.data(), mine.data(), count * esize);
          send = out.data();
        }
        all_reduce(send, out.data(), count, average);
        const size_t wrong = first_difference(out.data(), want.data(), count, esize);
        EXPECT_EQ(wrong, count) << name << ": element " << wrong << " differs from the rank-order sum (seed " << seed
                                << ")";
        EXPECT_EQ(out.back(), 0xEE) << name << ": wrote past the end";
        EXPECT_TRUE(runtime::same_on_every_rank(MPI_COMM_WORLD, runtime::fingerprint(out.data(), count * esize)))
            << name << ": ranks hold different results (seed " << seed << ")";
      }
    }
  }
}

TEST(SharedMemoryAllReduce, RankOrderSumOverChunks) {
  test::Watchdog watchdog("SharedMemoryAllReduce.RankOrderSumOverChunks", 240);
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  std::string why;
  std::unique_ptr<SharedMemoryAllReduce> shm = SharedMemoryAllReduce::create(MPI_COMM_WORLD, kChunkBytes, &why);
  ASSERT_TRUE(shm) << "every rank of this test is on one host, yet no shared memory: " << why;
  EXPECT_EQ(shm->chunk_floats(), kChunkFloats);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    check_every_case("shared-memory all_reduce", dtype, seed,
                     [&](const void* send, void* recv, size_t count, bool average) {
                       const float scale = average ? 1.0f / static_cast<float>(world_size()) : 1.0f;
                       shm->all_reduce(send, recv, count, dtype, scale);
                     });
  }
}

class MpiRingSharedMemory : public testing::TestWithParam<DType> {};

// Through the communicator with no size threshold, so every count takes the shared memory (on 2
// or more ranks; one rank's all-reduce is a copy).
TEST_P(MpiRingSharedMemory, AllReduceIsTheRankOrderSum) {
  test::Watchdog watchdog("MpiRingSharedMemory " + std::string(runtime::dtype_name(GetParam())), 240);
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{});
  RingTuning tuning;
  tuning.shm = true;
  tuning.shm_min_bytes = 0;
  tuning.shm_chunk_bytes = kChunkBytes;
  MpiRingCommunicator ring(ctx.world(), tuning);
  Communicator& comm = ring;  // all_reduce is the interface's
  check_every_case(
      "mpi-ring all_reduce", GetParam(), seed, [&](const void* send, void* recv, size_t count, bool average) {
        comm.all_reduce(send, recv, count, GetParam(), average ? ReduceOp::kAverage : ReduceOp::kSum).wait();
      });
}

INSTANTIATE_TEST_SUITE_P(DTypes, MpiRingSharedMemory, testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const testing::TestParamInfo<DType>& dtype) {
                           return std::string(runtime::dtype_name(dtype.param));
                         });

}  // namespace
}  // namespace dtrain::comm
