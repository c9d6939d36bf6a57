// A host-side communicator whose run() failed is unusable on that rank: an operation cut off
// partway may have left messages posted that the next one's would match. Later operations,
// queued behind the failure or submitted after it, fail with an error naming the first failure;
// the other ranks, whose part of the failed operation completed, are not held. A failure before
// any data moves (an injected fault) leaves the communicator usable.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "comm/backends/host_communicator.h"
#include "runtime/base/error.h"
#include "runtime/mpi/mpi_check.h"
#include "tests/comm/test_backends.h"
#include "tests/comm/watchdog.h"
#include "tests/support/mpi_world.h"

namespace dtrain::comm {
namespace {

using test::world_rank;
using test::world_size;

// Sums fp32 buffers with MPI_Allreduce, then fails on `failing_rank` after the transfer of its
// `failing_call`-th operation, as a copy back or a widening after the ring would.
class FailsAfterTransfer final : public HostCommunicator {
 public:
  FailsAfterTransfer(int failing_rank, int failing_call)
      : HostCommunicator(MPI_COMM_WORLD), failing_rank_(failing_rank), failing_call_(failing_call) {}
  ~FailsAfterTransfer() override { stop_worker(); }
  const char* name() const override { return "fails-after-transfer"; }

 private:
  void run(const Collective& call) override {
    const void* send = call.send == call.recv ? MPI_IN_PLACE : call.send;
    DTRAIN_MPI_CHECK(MPI_Allreduce(send, call.recv, static_cast<int>(call.count), MPI_FLOAT, MPI_SUM, mpi_comm()));
    if (++calls_ == failing_call_ && rank() == failing_rank_) DTRAIN_FAIL() << "failure after the transfer (test)";
  }

  const int failing_rank_;
  const int failing_call_;
  int calls_ = 0;
};

// Large enough to be queued on the worker rather than run on the caller's thread.
constexpr size_t kCount = (size_t{1} << 16) + 5;

std::string error_of(Work& work) {
  try {
    work.wait();
  } catch (const runtime::Error& e) {
    return e.what();
  }
  return "";
}

TEST(UnusableAfterFailure, LaterOperationsOnTheFailedRankFailNamingTheFirstFailure) {
  test::Watchdog watchdog("UnusableAfterFailure", 120);
  const int failing = world_size() - 1;
  FailsAfterTransfer comm(failing, 2);
  std::vector<float> a(kCount, float(world_rank() + 1)), b = a, c = a, d = a;
  const float sum = float(world_size() * (world_size() + 1) / 2);

  Work first = comm.all_reduce(a.data(), a.data(), kCount, DType::kF32, ReduceOp::kSum);
  first.wait();
  EXPECT_EQ(a[0], sum);
  EXPECT_EQ(a[kCount - 1], sum);

  Work second = comm.all_reduce(b.data(), b.data(), kCount, DType::kF32, ReduceOp::kSum);
  if (world_rank() != failing) {
    second.wait();  // its part completed: the rank that failed after it holds nobody
    EXPECT_EQ(b[kCount - 1], sum);
    MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
  // Queued behind the failing operation before it failed, or refused at the call if it already had.
  std::string behind;
  try {
    Work third = comm.all_reduce(c.data(), c.data(), kCount, DType::kF32, ReduceOp::kSum);
    behind = error_of(third);
  } catch (const runtime::Error& e) {
    behind = e.what();
  }
  EXPECT_NE(error_of(second).find("failure after the transfer (test)"), std::string::npos);
  std::string after;
  try {
    comm.all_reduce(d.data(), d.data(), kCount, DType::kF32, ReduceOp::kSum);
  } catch (const runtime::Error& e) {
    after = e.what();
  }
  for (const std::string& message : {behind, after}) {
    EXPECT_NE(message.find("fails-after-transfer communicator on rank " + std::to_string(failing)), std::string::npos)
        << message;
    EXPECT_NE(message.find("can no longer be used"), std::string::npos) << message;
    EXPECT_NE(message.find("failure after the transfer (test)"), std::string::npos) << message;
  }
  // Neither ran: their data is untouched.
  EXPECT_EQ(c[0], float(world_rank() + 1));
  EXPECT_EQ(d[0], float(world_rank() + 1));
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(UnusableAfterFailure, AFailureBeforeAnyDataMovesLeavesTheCommunicatorUsable) {
  test::Watchdog watchdog("UnusableAfterFailure injected", 120);
  for (const char* backend : {"mpi-ring", "mpi"}) {
    setenv("DTRAIN_FAULT_INJECT", "1", 1);
    test::Backend b = test::make_backend(test::BackendCase{backend, 1});
    unsetenv("DTRAIN_FAULT_INJECT");
    std::vector<float> x(kCount, float(world_rank() + 1));
    Work failed = b.comm->all_reduce(x.data(), x.data(), kCount, DType::kF32, ReduceOp::kSum);
    EXPECT_NE(error_of(failed).find("DTRAIN_FAULT_INJECT"), std::string::npos) << backend;
    Work next = b.comm->all_reduce(x.data(), x.data(), kCount, DType::kF32, ReduceOp::kSum);
    EXPECT_EQ(error_of(next), "") << backend;
    EXPECT_EQ(x[kCount - 1], float(world_size() * (world_size() + 1) / 2)) << backend;
  }
}

}  // namespace
}  // namespace dtrain::comm
