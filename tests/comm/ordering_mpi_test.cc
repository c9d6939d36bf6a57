// One collective at a time per communicator, in submission order (communicator.h): a mix of
// all-reduces (large, on the worker, and small, inline), broadcasts from a moving root,
// all-gathers and reduce-scatters is submitted without waiting, then waited for in reverse order,
// and every result must be exact, round after round. On the host for mpi-ring, mpi and
// hierarchical with 1 and 2 ranks per simulated node; with GPUs (one per rank; skipped, saying
// why, without) the same mix with device calls interleaved, on hierarchical and staged mpi-ring.
// Before the fix, hierarchical ran a broadcast's consistency check on the caller's thread while
// its worker ran an all-reduce's on the same MPI communicator.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "tests/comm/test_backends.h"
#include "tests/comm/watchdog.h"
#include "tests/support/mpi_world.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"
#endif

namespace dtrain::comm {
namespace {

using test::BackendCase;
using test::world_rank;
using test::world_size;

constexpr int kRounds = 12;

// Small integers: every sum is exact in fp32, whatever the order of the additions.
float value(int rank, int stream, size_t i, int round) {
  return static_cast<float>(static_cast<int>((rank * 7 + i * 3 + round * 5 + stream * 11) % 13) - 6);
}

std::vector<float> values(int rank, int stream, size_t n, int round) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value(rank, stream, i, round);
  return v;
}

float sum_over_ranks(int stream, size_t i, int round) {
  float s = 0;
  for (int r = 0; r < world_size(); ++r) s += value(r, stream, i, round);
  return s;
}

// Expected all-reduce result: exact sums, and the average as every backend computes it (the exact
// sum times 1/n in fp32).
float reduced(int stream, size_t i, int round, ReduceOp op) {
  const float s = sum_over_ranks(stream, i, round);
  return op == ReduceOp::kSum ? s : s * (1.0f / static_cast<float>(world_size()));
}

// Counts mismatches and reports the first.
void expect_all(const std::vector<float>& got, const std::function<float(size_t)>& want, const std::string& what) {
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float w = want(i);
    if (std::fabs(got[i] - w) > 1e-6f * std::fabs(w)) {
      if (wrong++ == 0) first = i;
    }
  }
  EXPECT_EQ(wrong, 0u) << what << ": " << wrong << " of " << got.size() << " wrong, first at " << first << ": got "
                       << (wrong ? got[first] : 0.0f) << ", want " << (wrong ? want(first) : 0.0f);
}

// The host calls of one round, submitted and not yet waited for.
struct HostMix {
  static constexpr size_t kLarge = 100003, kSmall = 7, kBroadcast = 5003, kGather = 1201, kScatter = 907;
  int round = 0;
  std::vector<float> large, small, broadcast, gather_send, gather_recv, scatter_send, scatter_recv, second;
  std::vector<Work> works;

  void submit(Communicator& comm, int r) {
    round = r;
    const int rank = world_rank(), n = world_size();
    large = values(rank, 0, kLarge, round);
    small = values(rank, 1, kSmall, round);
    broadcast = values(rank, 2, kBroadcast, round);
    gather_send = values(rank, 3, kGather, round);
    gather_recv.assign(kGather * static_cast<size_t>(n), -99.0f);
    scatter_send = values(rank, 4, kScatter * static_cast<size_t>(n), round);
    scatter_recv.assign(kScatter, -99.0f);
    second = values(rank, 5, 2 * kLarge + 1, round);
    works.push_back(comm.all_reduce(large.data(), large.data(), kLarge, DType::kF32, ReduceOp::kSum));
    works.push_back(comm.broadcast(broadcast.data(), kBroadcast, DType::kF32, round % n));
    works.push_back(comm.all_reduce(small.data(), small.data(), kSmall, DType::kF32, ReduceOp::kAverage));
    works.push_back(comm.all_gather(gather_send.data(), gather_recv.data(), kGather, DType::kF32));
    works.push_back(
        comm.reduce_scatter(scatter_send.data(), scatter_recv.data(), kScatter, DType::kF32, ReduceOp::kSum));
    works.push_back(comm.all_reduce(second.data(), second.data(), second.size(), DType::kF32, ReduceOp::kAverage));
  }

  void wait_and_check() {
    for (auto w = works.rbegin(); w != works.rend(); ++w) w->wait();
    works.clear();
    const std::string at = " (round " + std::to_string(round) + ")";
    const int n = world_size(), rank = world_rank();
    expect_all(
        large, [&](size_t i) { return reduced(0, i, round, ReduceOp::kSum); }, "large all_reduce" + at);
    expect_all(
        broadcast, [&](size_t i) { return value(round % n, 2, i, round); }, "broadcast" + at);
    expect_all(
        small, [&](size_t i) { return reduced(1, i, round, ReduceOp::kAverage); }, "small all_reduce" + at);
    expect_all(
        gather_recv, [&](size_t i) { return value(static_cast<int>(i / kGather), 3, i % kGather, round); },
        "all_gather" + at);
    expect_all(
        scatter_recv, [&](size_t i) { return sum_over_ranks(4, static_cast<size_t>(rank) * kScatter + i, round); },
        "reduce_scatter" + at);
    expect_all(
        second, [&](size_t i) { return reduced(5, i, round, ReduceOp::kAverage); }, "second all_reduce" + at);
  }
};

class HostOrdering : public testing::TestWithParam<BackendCase> {};

TEST_P(HostOrdering, MixedCallsBeforeWaitingGiveExactResults) {
  test::Watchdog watchdog("HostOrdering " + test::backend_label(GetParam()), 240);
  RingTuning tuning;
  tuning.segment_bytes = 64 * 1024;
  test::Backend b = test::make_backend(GetParam(), tuning);
  for (int round = 0; round < kRounds; ++round) {
    HostMix mix;
    mix.submit(*b.comm, round);
    mix.wait_and_check();
    // Two rounds in flight at once as well: the second submitted before the first is waited for.
    HostMix first, second;
    first.submit(*b.comm, round + 100);
    second.submit(*b.comm, round + 200);
    second.wait_and_check();
    first.wait_and_check();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, HostOrdering,
                         testing::Values(BackendCase{"mpi-ring", 1}, BackendCase{"mpi", 1},
                                         BackendCase{"hierarchical", 1}, BackendCase{"hierarchical", 2}),
                         test::backend_param_label);

#if DTRAIN_WITH_CUDA

// Device buffers holding `values` (copied before the call returns).
struct DeviceFloats {
  float* data = nullptr;
  size_t n = 0;
  explicit DeviceFloats(const std::vector<float>& v) : n(v.size()) {
    DTRAIN_CUDA_CHECK(cudaMalloc(&data, std::max<size_t>(n, 1) * sizeof(float)));
    DTRAIN_CUDA_CHECK(cudaMemcpy(data, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~DeviceFloats() { cudaFree(data); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  std::vector<float> to_host() const {
    std::vector<float> v(n);
    DTRAIN_CUDA_CHECK(cudaMemcpy(v.data(), data, n * sizeof(float), cudaMemcpyDeviceToHost));
    return v;
  }
};

#endif  // DTRAIN_WITH_CUDA

class DeviceOrdering : public testing::TestWithParam<BackendCase> {};

TEST_P(DeviceOrdering, HostAndDeviceCallsMixedBeforeWaitingGiveExactResults) {
  if (const std::string why = test::why_no_gpu_per_rank(); !why.empty()) GTEST_SKIP() << why;
#if DTRAIN_WITH_CUDA
  test::Watchdog watchdog("DeviceOrdering " + test::backend_label(GetParam()), 240);
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "stage", 1);  // the staged path, whatever this MPI reports
  setenv("DTRAIN_STAGING_PIECE_BYTES", "65536", 1);  // many pieces in flight
  RingTuning tuning;
  tuning.segment_bytes = 64 * 1024;
  test::Backend b = test::make_backend(GetParam(), tuning);
  unsetenv("DTRAIN_STAGING_PIECE_BYTES");
  int device = 0;
  DTRAIN_CUDA_CHECK(cudaGetDevice(&device));
  runtime::CudaStream stream(device);
  const int rank = world_rank(), n = world_size();
  const auto where = Location::gpu(stream.get());
  for (int round = 0; round < kRounds; ++round) {
    constexpr size_t kDevice = 300007, kDeviceBroadcast = 70001;
    DeviceFloats sum(values(rank, 6, kDevice, round));
    DeviceFloats average(values(rank, 7, kDevice / 3, round));
    DeviceFloats broadcast(values(rank, 8, kDeviceBroadcast, round));
    HostMix host;
    std::vector<Work> device_works;
    device_works.push_back(b.comm->all_reduce(sum.data, sum.data, sum.n, DType::kF32, ReduceOp::kSum, where));
    host.submit(*b.comm, round);
    device_works.push_back(b.comm->broadcast(broadcast.data, broadcast.n, DType::kF32, (round + 1) % n, where));
    HostMix more;
    more.submit(*b.comm, round + 100);
    device_works.push_back(
        b.comm->all_reduce(average.data, average.data, average.n, DType::kF32, ReduceOp::kAverage, where));
    host.wait_and_check();
    more.wait_and_check();
    for (const Work& w : device_works) w.wait();
    stream.synchronize();
    const std::string at = " (device, round " + std::to_string(round) + ")";
    expect_all(
        sum.to_host(), [&](size_t i) { return reduced(6, i, round, ReduceOp::kSum); }, "all_reduce" + at);
    expect_all(
        average.to_host(), [&](size_t i) { return reduced(7, i, round, ReduceOp::kAverage); },
        "average all_reduce" + at);
    expect_all(
        broadcast.to_host(), [&](size_t i) { return value((round + 1) % n, 8, i, round); }, "broadcast" + at);
  }
#endif  // DTRAIN_WITH_CUDA
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceOrdering,
                         testing::Values(BackendCase{"mpi-ring", 1, true}, BackendCase{"hierarchical", 1, true},
                                         BackendCase{"hierarchical", 2, true}),
                         test::backend_param_label);

}  // namespace
}  // namespace dtrain::comm
