// A failure in the data plane reaches the caller on every rank, and nothing hangs.
// DTRAIN_FAULT_INJECT (comm/diagnostics/fault_injection.h) makes the K-th operation of every
// host-side communicator fail, as a real failure would, on its worker thread:
//   - host path (CPU, in CI): the gradient synchronizer's finish() throws the error on every rank,
//     on mpi-ring, mpi and hierarchical (1 and 2 ranks per simulated node), with small buckets and
//     with buckets large enough for the ring's lanes;
//   - device path (GPUs, one per rank; skipped, saying why, without): the failed staged
//     all-reduce's Work throws on every rank, hierarchical's Work carries its cross-node step's
//     failure, and the caller's stream is not left held: the next calls complete, exactly.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <cmath>
#include <string>
#include <vector>

#include "comm/diagnostics/fault_injection.h"
#include "comm/gradient_sync/gradient_synchronizer.h"
#include "runtime/base/error.h"
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

// Makes a backend whose host-side communicators fail their `at`-th operation.
test::Backend make_faulty(const BackendCase& c, int at) {
  setenv("DTRAIN_FAULT_INJECT", std::to_string(at).c_str(), 1);
  test::Backend b = test::make_backend(c);
  unsetenv("DTRAIN_FAULT_INJECT");
  return b;
}

TEST(FaultPlan, ParsesOperationAndRankAndRefusesGarbage) {
  unsetenv("DTRAIN_FAULT_INJECT");
  EXPECT_EQ(fault_plan_from_env().at_operation, 0u);
  setenv("DTRAIN_FAULT_INJECT", "7", 1);
  EXPECT_EQ(fault_plan_from_env().at_operation, 7u);
  EXPECT_EQ(fault_plan_from_env().only_world_rank, -1);
  setenv("DTRAIN_FAULT_INJECT", "3,1", 1);
  EXPECT_EQ(fault_plan_from_env().at_operation, 3u);
  EXPECT_EQ(fault_plan_from_env().only_world_rank, 1);
  EXPECT_FALSE(fault_plan_from_env().stop);
  setenv("DTRAIN_FAULT_INJECT", "4,2,stop", 1);
  EXPECT_EQ(fault_plan_from_env().at_operation, 4u);
  EXPECT_EQ(fault_plan_from_env().only_world_rank, 2);
  EXPECT_TRUE(fault_plan_from_env().stop);
  for (const char* bad : {"0", "x", "3,", "3,-1", "2x", "3,stop", "3,1,", "3,1,halt"}) {
    setenv("DTRAIN_FAULT_INJECT", bad, 1);
    EXPECT_THROW(fault_plan_from_env(), runtime::UsageError) << bad;
  }
  unsetenv("DTRAIN_FAULT_INJECT");
}

class HostFaults : public testing::TestWithParam<BackendCase> {};

// Steps of `count` gradients in buckets of `bucket_bytes` until finish() throws; the failure is
// operation 3 of every communicator.
void expect_failed_all_reduce_throws_on_every_rank(const BackendCase& c, size_t count, size_t bucket_bytes) {
  test::Backend b = make_faulty(c, 3);
  std::vector<float> grads(count);
  GradientSynchronizer sync(*b.comm, grads.data(), plan_buckets(count, {bucket_bytes, 0}), DType::kF32);
  std::string error;
  int failed_step = -1;
  const size_t chunk = count / 5 + 1;
  for (int step = 0; step < 3 && failed_step < 0; ++step) {
    for (size_t i = 0; i < count; ++i) grads[i] = static_cast<float>(world_rank() + 1);
    sync.begin_step();
    for (size_t end = count; end > 0; end = end > chunk ? end - chunk : 0) {
      sync.mark_ready(end > chunk ? end - chunk : 0, end);
    }
    try {
      sync.finish();
    } catch (const runtime::Error& e) {
      error = e.what();
      failed_step = step;
    }
  }
  ASSERT_GE(failed_step, 0) << "no step failed although operation 3 of every communicator was made to";
  EXPECT_NE(error.find("injected fault (DTRAIN_FAULT_INJECT)"), std::string::npos) << error;
  // Every rank failed at the same step: none went on with a partial average.
  int steps[2] = {failed_step, -failed_step};
  MPI_Allreduce(MPI_IN_PLACE, steps, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(steps[0], -steps[1]) << "ranks failed at different steps";
}

TEST_P(HostFaults, FailedAllReduceThrowsFromFinishOnEveryRank) {
  test::Watchdog watchdog("HostFaults " + test::backend_label(GetParam()), 180);
  expect_failed_all_reduce_throws_on_every_rank(GetParam(), 250007, 256 * 1024);  // 4 buckets of 64 K elements
}

// Buckets large enough for the ring's lanes (two by default, ring_lanes.h: from 1 MiB a lane) on
// the rings that cross simulated nodes, before and after the failed operation.
TEST_P(HostFaults, FailedAllReduceAmongLaneSizedBucketsThrowsOnEveryRank) {
  test::Watchdog watchdog("HostFaults (lane-sized buckets) " + test::backend_label(GetParam()), 180);
  expect_failed_all_reduce_throws_on_every_rank(GetParam(), 1500007, size_t{3} << 20);  // 2 buckets of 3 MiB
}

INSTANTIATE_TEST_SUITE_P(Backends, HostFaults,
                         testing::Values(BackendCase{"mpi-ring", 1}, BackendCase{"mpi", 1},
                                         BackendCase{"hierarchical", 1}, BackendCase{"hierarchical", 2}),
                         test::backend_param_label);

class DeviceFaults : public testing::TestWithParam<BackendCase> {};

TEST_P(DeviceFaults, FailedAllReduceFailsItsWorkAndReleasesTheStream) {
  if (const std::string why = test::why_no_gpu_per_rank(); !why.empty()) GTEST_SKIP() << why;
#if DTRAIN_WITH_CUDA
  test::Watchdog watchdog("DeviceFaults " + test::backend_label(GetParam()), 180);
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "stage", 1);
  test::Backend b = make_faulty(GetParam(), 2);
  int device = 0;
  DTRAIN_CUDA_CHECK(cudaGetDevice(&device));
  runtime::CudaStream stream(device);
  constexpr int kCalls = 5;
  constexpr size_t kCount = 1 << 20;
  float* data = nullptr;
  DTRAIN_CUDA_CHECK(cudaMalloc(&data, kCalls * kCount * sizeof(float)));
  std::vector<float> host(kCalls * kCount, static_cast<float>(world_rank() + 1));
  DTRAIN_CUDA_CHECK(cudaMemcpy(data, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<Work> works;
  for (int k = 0; k < kCalls; ++k) {
    float* at = data + static_cast<size_t>(k) * kCount;
    works.push_back(b.comm->all_reduce(at, at, kCount, DType::kF32, ReduceOp::kSum, Location::gpu(stream.get())));
  }
  stream.synchronize();  // not held by the failed call
  for (int k = 0; k < kCalls; ++k) {
    if (k == 1) {
      try {
        works[1].wait();
        ADD_FAILURE() << "the second all-reduce was made to fail, and its Work completed";
      } catch (const runtime::Error& e) {
        EXPECT_NE(std::string(e.what()).find("injected fault"), std::string::npos) << e.what();
      }
      continue;
    }
    EXPECT_NO_THROW(works[static_cast<size_t>(k)].wait()) << "all-reduce " << k;
  }
  DTRAIN_CUDA_CHECK(cudaMemcpy(host.data(), data, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const float sum = static_cast<float>(world_size() * (world_size() + 1) / 2);
  for (int k = 0; k < kCalls; ++k) {
    if (k == 1) continue;  // undefined after the failure
    size_t wrong = 0;
    for (size_t i = 0; i < kCount; ++i) wrong += host[static_cast<size_t>(k) * kCount + i] != sum;
    EXPECT_EQ(wrong, 0u) << "all-reduce " << k << " after the failed one";
  }
  cudaFree(data);
#endif
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceFaults,
                         testing::Values(BackendCase{"mpi-ring", 1, true}, BackendCase{"hierarchical", 1, true},
                                         BackendCase{"hierarchical", 2, true}),
                         test::backend_param_label);

}  // namespace
}  // namespace dtrain::comm
