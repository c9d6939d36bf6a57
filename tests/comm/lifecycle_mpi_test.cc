// Bad input and end of life: ranks that disagree on ring tuning or staging pieces get
// a UsageError at construction, on every rank, naming the variable and the values; a
// communicator destroyed with work still queued finishes that work and does not crash (its
// worker thread used to outlive the ring members of the derived class).
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/backends/mpi_ring_communicator.h"
#include "comm/gradient_sync/gradient_synchronizer.h"
#include "runtime/base/error.h"
#include "tests/comm/test_backends.h"
#include "tests/comm/watchdog.h"
#include "tests/support/mpi_world.h"

namespace dtrain::comm {
namespace {

using test::BackendCase;
using test::world_rank;
using test::world_size;

class DestroyedWithWorkQueued : public testing::TestWithParam<BackendCase> {};

TEST_P(DestroyedWithWorkQueued, FinishesTheQueuedWorkAndDoesNotCrash) {
  test::Watchdog watchdog("DestroyedWithWorkQueued " + test::backend_label(GetParam()), 120);
  for (int repeat = 0; repeat < 5; ++repeat) {
    test::Backend b = test::make_backend(GetParam());
    constexpr int kCalls = 6;
    constexpr size_t kCount = (1 << 20) + 3;
    std::vector<std::vector<float>> data(kCalls, std::vector<float>(kCount, static_cast<float>(world_rank() + 1)));
    std::vector<Work> works;
    for (auto& d : data) works.push_back(b.comm->all_reduce(d.data(), d.data(), kCount, DType::kF32, ReduceOp::kSum));
    b.comm.reset();  // with everything still queued
    const float sum = static_cast<float>(world_size() * (world_size() + 1) / 2);
    for (int k = 0; k < kCalls; ++k) {
      ASSERT_TRUE(works[static_cast<size_t>(k)].test()) << "call " << k << " still pending after the destructor";
      EXPECT_EQ(data[static_cast<size_t>(k)][0], sum);
      EXPECT_EQ(data[static_cast<size_t>(k)][kCount - 1], sum);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DestroyedWithWorkQueued,
                         testing::Values(BackendCase{"mpi-ring", 1}, BackendCase{"mpi", 1},
                                         BackendCase{"hierarchical", 1}, BackendCase{"hierarchical", 2}),
                         test::backend_param_label);

// An exception in backward with buckets in flight: the synchronizer is
// destroyed mid-step, then its communicator, with 16-bit wire copies still being all-reduced. The
// queued all-reduces must finish before the copies are freed: no use-after-free (ASAN), no crash.
class SynchronizerAbandonedMidStep : public testing::TestWithParam<BackendCase> {};

TEST_P(SynchronizerAbandonedMidStep, QueuedBucketsFinishBeforeTheirBuffersGo) {
  test::Watchdog watchdog("SynchronizerAbandonedMidStep " + test::backend_label(GetParam()), 180);
  for (int repeat = 0; repeat < 4; ++repeat) {
    test::Backend b = test::make_backend(GetParam());
    const size_t count = (size_t{1} << 22) + 5;  // 17 buckets of 1 MiB
    std::vector<float> grads(count, static_cast<float>(world_rank() + 1));
    for (DType wire : {DType::kBF16, DType::kF32}) {
      auto sync = std::make_unique<GradientSynchronizer>(*b.comm, grads.data(),
                                                         plan_buckets(count, {size_t{1} << 20, 0}), wire);
      sync->begin_step();
      sync->mark_ready(count / 4, count);  // the last three quarters: 13 buckets queued
      sync.reset();                        // unwinding from the exception
    }
    b.comm.reset();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SynchronizerAbandonedMidStep,
                         testing::Values(BackendCase{"mpi-ring", 1}, BackendCase{"mpi", 1},
                                         BackendCase{"hierarchical", 1}, BackendCase{"hierarchical", 2}),
                         test::backend_param_label);

TEST(SynchronizerAbandonedMidStep, InjectedBackwardFaultThrowsWithBucketsInFlight) {
  test::Watchdog watchdog("InjectedBackwardFault", 120);
  setenv("DTRAIN_FAULT_INJECT_BACKWARD", "2", 1);
  test::Backend b = test::make_backend(BackendCase{"mpi-ring", 1});
  const size_t count = (size_t{1} << 20) + 3;
  std::vector<float> grads(count, 1.0f);
  std::string error;
  {
    GradientSynchronizer sync(*b.comm, grads.data(), plan_buckets(count, {size_t{1} << 20, 0}), DType::kBF16);
    unsetenv("DTRAIN_FAULT_INJECT_BACKWARD");
    try {
      for (int step = 0; step < 3; ++step) {
        sync.begin_step();
        for (size_t end = count; end > 0; end = end > 100000 ? end - 100000 : 0) {
          sync.mark_ready(end > 100000 ? end - 100000 : 0, end);
        }
        sync.finish();
      }
    } catch (const runtime::Error& e) {
      error = e.what();
    }
  }
  EXPECT_NE(error.find("injected fault in backward (DTRAIN_FAULT_INJECT_BACKWARD): step 2, with 1 bucket"),
            std::string::npos)
      << error;
}

// Runs `make` on every rank, which must throw a UsageError on every rank whose text contains
// each of `expected`.
template <typename Make>
void expect_usage_error_everywhere(Make make, const std::vector<std::string>& expected) {
  std::string text;
  try {
    make();
  } catch (const runtime::UsageError& e) {
    text = e.what();
  }
  ASSERT_FALSE(text.empty()) << "no UsageError on rank " << world_rank();
  for (const std::string& part : expected) EXPECT_NE(text.find(part), std::string::npos) << text;
}

TEST(RingTuningAgreement, DifferentSegmentBytesAreNamedWithBothValues) {
  if (world_size() == 1) GTEST_SKIP() << "needs 2 or more ranks to disagree";
  RingTuning tuning;
  tuning.segment_bytes = world_rank() == 0 ? 65536 : 131072;
  const std::string others = world_size() == 2 ? "131072 on rank 1" : "131072 on ranks 1,";
  expect_usage_error_everywhere([&] { MpiRingCommunicator comm(MPI_COMM_WORLD, tuning); },
                                {"DTRAIN_RING_SEGMENT_BYTES differs between ranks", "65536 on rank 0", others,
                                 "mpirun -x DTRAIN_RING_SEGMENT_BYTES"});
}

// A setting that is an option, not a DTRAIN_ variable, is named as one (no mpirun -x hint).
TEST(RingTuningAgreement, DifferentWireFormatsAreNamedAsAnOption) {
  if (world_size() == 1) GTEST_SKIP() << "needs 2 or more ranks to disagree";
  const runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{1, false});
  const DType wire = world_rank() == 0 ? DType::kF32 : DType::kBF16;
  std::string text;
  try {
    HierarchicalCommunicator comm(ctx, false, RingTuning{}, wire);
  } catch (const runtime::UsageError& e) {
    text = e.what();
  }
  ASSERT_FALSE(text.empty()) << "no UsageError on rank " << world_rank();
  EXPECT_NE(text.find("(gradient_wire_dtype) differs between ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("pass the same option to every rank"), std::string::npos) << text;
  EXPECT_EQ(text.find("mpirun -x"), std::string::npos) << text;
}

TEST(RingTuningAgreement, DifferentSmallBytesAreNamedOnHierarchicalToo) {
  if (world_size() == 1) GTEST_SKIP() << "needs 2 or more ranks to disagree";
  RingTuning tuning;
  tuning.small_bytes = world_rank() == world_size() - 1 ? 4096 : 16384;
  const runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{1, false});
  expect_usage_error_everywhere(
      [&] { HierarchicalCommunicator comm(ctx, false, tuning); },
      {"DTRAIN_RING_SMALL_BYTES differs between ranks", "4096 on rank " + std::to_string(world_size() - 1)});
}

TEST(RingTuningAgreement, DifferentStagingPiecesAreNamed) {
  if (world_size() == 1) GTEST_SKIP() << "needs 2 or more ranks to disagree";
  setenv("DTRAIN_STAGING_PIECE_BYTES", world_rank() == 0 ? "1048576" : "2097152", 1);
  expect_usage_error_everywhere([&] { MpiRingCommunicator comm(MPI_COMM_WORLD, RingTuning{}); },
                                {"DTRAIN_STAGING_PIECE_BYTES differs between ranks", "1048576 on rank 0"});
  unsetenv("DTRAIN_STAGING_PIECE_BYTES");
}

TEST(RingTuningAgreement, DifferentDevicePointerModesAreNamed) {
  if (world_size() == 1) GTEST_SKIP() << "needs 2 or more ranks to disagree";
  setenv("DTRAIN_MPI_DEVICE_POINTERS", world_rank() == 0 ? "stage" : "direct-managed", 1);
  expect_usage_error_everywhere(
      [&] { MpiRingCommunicator comm(MPI_COMM_WORLD, RingTuning{}); },
      {"DTRAIN_MPI_DEVICE_POINTERS differs between ranks", "'staged through pinned host memory' on rank 0"});
  unsetenv("DTRAIN_MPI_DEVICE_POINTERS");
}

TEST(RingTuningAgreement, SameTuningOnEveryRankIsAccepted) {
  RingTuning tuning;
  tuning.segment_bytes = 12345;
  MpiRingCommunicator ring(MPI_COMM_WORLD, tuning);
  Communicator& comm = ring;
  float x = 1.0f;
  comm.all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum).wait();
  EXPECT_EQ(x, static_cast<float>(world_size()));
}

}  // namespace
}  // namespace dtrain::comm
