// Cases for the multi-rank gtest main's handling of a failed rank (tests/support/mpi_gtest_main.cc),
// run by ctest with filters (tests/runtime/CMakeLists.txt): a rank that throws out of a test body
// while the other waits for it in a collective must end the job with the failure named, and a
// failure that leaves no rank waiting keeps the usual combined verdict.
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdexcept>

namespace {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

TEST(FailedRank, ThrowsWhileTheOthersWaitInACollective) {
  if (world_rank() == 1) throw std::runtime_error("rank 1 gives up before the collective");
  MPI_Barrier(MPI_COMM_WORLD);  // never joined by rank 1: without the harness's abort, a hang
}

TEST(FailedRank, FailsOnOneRankWithNoCollectiveOpen) {
  EXPECT_NE(world_rank(), 1) << "rank 1 fails this case on purpose";
}

TEST(FailedRank, RunsAfterAFailure) {
  int sum = 0;
  const int one = 1;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(sum, size);
}

}  // namespace
