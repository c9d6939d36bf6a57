// Rank context, communicators and GPU binding on 1 to 4 real ranks.
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <numeric>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/mpi/mpi_check.h"
#include "runtime/mpi/mpi_gather.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_context.h"
#include "tests/support/mpi_world.h"

namespace dtrain::runtime {
namespace {

using test::world_rank;
using test::world_size;

// Checks the invariants every layout must satisfy, using the communicators themselves.
void expect_consistent(const RankContext& ctx) {
  const Topology& t = ctx.topology();
  EXPECT_EQ(t.world_rank, world_rank());
  EXPECT_EQ(t.world_size, world_size());
  EXPECT_EQ(MpiComm::duplicate(ctx.node()).size(), t.local_size);

  int node_rank = -1;
  MPI_Comm_rank(ctx.node(), &node_rank);
  EXPECT_EQ(node_rank, t.local_rank);

  // Cross-node communicator: one rank per node that has this local index, ordered by node.
  int cross_size = 0;
  MPI_Comm_size(ctx.cross_node(), &cross_size);
  EXPECT_LE(cross_size, t.node_count);
  std::vector<int> local_ranks(static_cast<size_t>(cross_size));
  MPI_Allgather(&t.local_rank, 1, MPI_INT, local_ranks.data(), 1, MPI_INT, ctx.cross_node());
  for (int lr : local_ranks) EXPECT_EQ(lr, t.local_rank);

  // Every rank agrees on the node count, and local sizes add up to the world.
  int node_count_max = 0;
  MPI_Allreduce(&t.node_count, &node_count_max, 1, MPI_INT, MPI_MAX, ctx.world());
  EXPECT_EQ(node_count_max, t.node_count);
  int leaders = t.local_rank == 0 ? t.local_size : 0;
  int total = 0;
  MPI_Allreduce(&leaders, &total, 1, MPI_INT, MPI_SUM, ctx.world());
  EXPECT_EQ(total, t.world_size);
}

TEST(RankContext, RealNodesFromSharedMemorySplit) {
  const RankContext ctx(MPI_COMM_WORLD, NodeLayout{});
  expect_consistent(ctx);
  // ctest runs every rank on this one host.
  EXPECT_EQ(ctx.topology().node_count, 1);
  EXPECT_EQ(ctx.topology().local_rank, world_rank());
  EXPECT_FALSE(ctx.topology().simulated_nodes);
}

TEST(RankContext, SimulatedNodesOfOneRank) {
  const RankContext ctx(MPI_COMM_WORLD, NodeLayout{1, false});
  expect_consistent(ctx);
  EXPECT_EQ(ctx.topology().node_count, world_size());
  EXPECT_EQ(ctx.topology().node_index, world_rank());
  EXPECT_EQ(ctx.topology().local_rank, 0);
  // The physical host is still one: GPU binding must not put every rank on GPU 0.
  EXPECT_EQ(ctx.topology().host_local_rank, world_rank());
}

TEST(RankContext, SimulatedNodesOfTwoRanksIncludingUnevenOnes) {
  const bool even = world_size() % 2 == 0;
  const RankContext ctx(MPI_COMM_WORLD, NodeLayout{2, true});
  expect_consistent(ctx);
  EXPECT_EQ(ctx.topology().node_count, (world_size() + 1) / 2);
  EXPECT_EQ(ctx.topology().node_index, world_rank() / 2);
  EXPECT_EQ(ctx.topology().local_rank, world_rank() % 2);
  if (!even && world_rank() == world_size() - 1) {
    EXPECT_EQ(ctx.topology().local_size, 1);
  }
}

TEST(RankContext, EnvironmentLayoutMustDivideTheWorld) {
  setenv("DTRAIN_RANKS_PER_NODE", "3", 1);
  if (world_size() % 3 == 0) {
    EXPECT_EQ(RankContext::from_environment().topology().local_size, 3);
  } else {
    EXPECT_THROW(RankContext::from_environment(), UsageError);
  }
  unsetenv("DTRAIN_RANKS_PER_NODE");
}

TEST(RankContext, CommunicatorsReturnMpiErrorsAsExceptions) {
  const RankContext ctx(MPI_COMM_WORLD, NodeLayout{});
  int value = 0;
  try {
    // A negative count is invalid; with MPI_ERRORS_RETURN it comes back as a code.
    DTRAIN_MPI_CHECK(MPI_Bcast(&value, -1, MPI_INT, 0, ctx.world())) << "broadcasting the test value";
    FAIL() << "no exception";
  } catch (const MpiError& e) {
    const std::string text = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kMpi);
    EXPECT_NE(text.find("MPI_Bcast"), std::string::npos) << text;
    EXPECT_NE(text.find("MPI_ERR_COUNT"), std::string::npos) << text;
    EXPECT_NE(text.find("broadcasting the test value"), std::string::npos) << text;
  }
}

TEST(GatherStrings, RootReceivesEveryRanksBytesInOrder) {
  const RankContext ctx(MPI_COMM_WORLD, NodeLayout{});
  const std::string mine(static_cast<size_t>(world_rank()) * 3, static_cast<char>('a' + world_rank()));
  const int root = world_size() - 1;
  const std::vector<std::string> all = gather_strings(ctx.world(), mine, root);
  if (world_rank() == root) {
    ASSERT_EQ(all.size(), static_cast<size_t>(world_size()));
    for (int r = 0; r < world_size(); ++r) {
      EXPECT_EQ(all[static_cast<size_t>(r)], std::string(static_cast<size_t>(r) * 3, static_cast<char>('a' + r)));
    }
  } else {
    EXPECT_TRUE(all.empty());
  }
}

TEST(GpuBinding, SimulatedGpusBindByHostLocalRankAndDetectSharing) {
  const RankContext ctx(MPI_COMM_WORLD, NodeLayout{1, false});  // simulated nodes, one host
  setenv("DTRAIN_SIMULATED_GPUS", "4", 1);
  const GpuBinding binding = bind_gpu(ctx, false);
  EXPECT_FALSE(binding.cpu_mode);
  EXPECT_EQ(binding.device.index, world_rank());

  setenv("DTRAIN_SIMULATED_GPUS", "1", 1);
  if (world_size() > 1) {
    try {
      bind_gpu(ctx, false);
      FAIL() << "no exception";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(world_size()) + " local ranks but only 1 GPU"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(bind_gpu(ctx, true).device.index, 0);

  setenv("DTRAIN_SIMULATED_GPUS", "0", 1);
  EXPECT_TRUE(bind_gpu(ctx, false).cpu_mode);
  unsetenv("DTRAIN_SIMULATED_GPUS");
}

// GPU placement groups ranks by the shared-memory host key, not by name: two hosts whose names
// share their first 63 characters (bind_gpu sent names in 64-byte records and grouped by them) are
// two hosts, each with its own GPU; names travel whole for the messages.
TEST(GpuBinding, HostsAreGroupedByHostKeyNotByATruncatedName) {
  const RankContext ctx(MPI_COMM_WORLD, NodeLayout{});
  EXPECT_EQ(ctx.topology().host_index, 0);  // one machine
  const std::string shared_prefix(63, 'n');
  RankGpuChoice mine;
  mine.world_rank = world_rank();
  mine.host_index = world_rank();  // as if each rank ran on a host of its own
  mine.host = shared_prefix + static_cast<char>('a' + world_rank()) + ".cluster.example.org";
  mine.visible_count = 1;
  mine.pci_bus_id = "0000:19:00.0";
  const std::vector<RankGpuChoice> choices = exchange_gpu_choices(ctx.world(), mine);
  ASSERT_EQ(choices.size(), static_cast<size_t>(world_size()));
  for (int r = 0; r < world_size(); ++r) {
    const RankGpuChoice& c = choices[static_cast<size_t>(r)];
    EXPECT_EQ(c.world_rank, r);
    EXPECT_EQ(c.host_index, r);
    EXPECT_EQ(c.host, shared_prefix + static_cast<char>('a' + r) + ".cluster.example.org");
  }
  EXPECT_EQ(gpu_placement_problem(choices, false), "");

  // The same ranks on one host (one key) share the one GPU: refused, naming the whole host name.
  mine.host_index = 0;
  const std::vector<RankGpuChoice> one_host = exchange_gpu_choices(ctx.world(), mine);
  if (world_size() > 1) {
    const std::string problem = gpu_placement_problem(one_host, false);
    EXPECT_NE(problem.find(std::to_string(world_size()) + " local ranks but only 1 GPU"), std::string::npos) << problem;
    EXPECT_NE(problem.find(".cluster.example.org"), std::string::npos) << problem;
  }
}

}  // namespace
}  // namespace dtrain::runtime
