// MPI thread level checked: communicators whose threads call MPI beside the
// caller's need MPI_THREAD_MULTIPLE. Here MPI is initialized with MPI_THREAD_SERIALIZED on
// purpose, and constructing one must fail with an error naming the MPI library and the level
// granted, instead of racing inside MPI later. Its own main: the usual one asks for MULTIPLE.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>

#include "comm/backends/hierarchical_communicator.h"
#include "comm/backends/mpi_ring_communicator.h"
#include "runtime/base/error.h"
#include "runtime/mpi/mpi_scope.h"
#include "runtime/rank/rank_context.h"

namespace dtrain::comm {
namespace {

void expect_thread_level_error(const std::string& text) {
  std::printf("  the error: %s\n", text.c_str());
  EXPECT_NE(text.find("needs MPI_THREAD_MULTIPLE"), std::string::npos) << text;
  EXPECT_NE(text.find("granted MPI_THREAD_SERIALIZED"), std::string::npos) << text;
  EXPECT_NE(text.find(runtime::mpi_library_version()), std::string::npos) << text;
}

TEST(ThreadLevel, MpiRingRefusesLessThanMultiple) {
  try {
    MpiRingCommunicator comm(MPI_COMM_WORLD, RingTuning{});
    ADD_FAILURE() << "constructed under MPI_THREAD_SERIALIZED";
  } catch (const runtime::Error& e) {
    expect_thread_level_error(e.what());
  }
}

TEST(ThreadLevel, HierarchicalRefusesLessThanMultiple) {
  const runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{1, false});
  try {
    HierarchicalCommunicator comm(ctx, false, RingTuning{});
    ADD_FAILURE() << "constructed under MPI_THREAD_SERIALIZED";
  } catch (const runtime::Error& e) {
    expect_thread_level_error(e.what());
  }
}

TEST(ThreadLevel, LibraryVersionIsNamed) {
  EXPECT_FALSE(runtime::mpi_library_version().empty());
}

}  // namespace
}  // namespace dtrain::comm

int main(int argc, char** argv) {
  int granted = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &granted);
  testing::InitGoogleTest(&argc, argv);
  int status = 0;
  if (granted != MPI_THREAD_SERIALIZED) {
    std::printf("MPI granted %s when asked for MPI_THREAD_SERIALIZED; nothing to test\n",
                dtrain::runtime::mpi_thread_level_name(granted));
  } else {
    status = RUN_ALL_TESTS();
  }
  MPI_Finalize();
  return status;
}
