// Placement rules without MPI: node numbering and the GPU-sharing verdict.
#include "runtime/rank/topology.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "runtime/base/error.h"
#include "runtime/rank/gpu_binding.h"

namespace dtrain::runtime {
namespace {

TEST(Topology, NodesAreNumberedByTheirLowestRank) {
  // Round-robin placement over two hosts keyed 7 and 3: ranks 0,2,4 on key 7; 1,3 on key 3.
  const std::vector<int64_t> keys = {7, 3, 7, 3, 7};
  const Topology t0 = topology_from_node_keys(0, keys);
  EXPECT_EQ(t0.node_count, 2);
  EXPECT_EQ(t0.node_index, 0);
  EXPECT_EQ(t0.local_rank, 0);
  EXPECT_EQ(t0.local_size, 3);
  const Topology t3 = topology_from_node_keys(3, keys);
  EXPECT_EQ(t3.node_index, 1);
  EXPECT_EQ(t3.local_rank, 1);
  EXPECT_EQ(t3.local_size, 2);
  const Topology t4 = topology_from_node_keys(4, keys);
  EXPECT_EQ(t4.local_rank, 2);
}

TEST(Topology, SimulatedNodesAreConsecutiveBlocks) {
  std::vector<int64_t> keys;
  for (int r = 0; r < 6; ++r) keys.push_back(simulated_node_key(r, 2));
  for (int r = 0; r < 6; ++r) {
    const Topology t = topology_from_node_keys(r, keys);
    EXPECT_EQ(t.node_index, r / 2);
    EXPECT_EQ(t.local_rank, r % 2);
    EXPECT_EQ(t.node_count, 3);
  }
}

// Simulated nodes split hosts: blocks of k consecutive ranks, each on one host.
TEST(Topology, SimulatedNodesMustNotSpanHosts) {
  auto keys = [](int ranks, int per_node) {
    std::vector<int64_t> k;
    for (int r = 0; r < ranks; ++r) k.push_back(simulated_node_key(r, per_node));
    return k;
  };
  const std::vector<int64_t> two_hosts_of_two = {0, 0, 2, 2};
  EXPECT_EQ(simulated_nodes_problem(keys(4, 1), two_hosts_of_two, 1), "");
  EXPECT_EQ(simulated_nodes_problem(keys(4, 2), two_hosts_of_two, 2), "");
  // Larger than the ranks on a host: a simulated node would join two hosts.
  const std::string larger = simulated_nodes_problem(keys(4, 4), two_hosts_of_two, 4);
  EXPECT_NE(larger.find("DTRAIN_RANKS_PER_NODE=4 puts world ranks 1 and 2 on different hosts into one simulated node"),
            std::string::npos)
      << larger;
  EXPECT_NE(larger.find("the host of rank 1 has 2 rank(s)"), std::string::npos) << larger;
  // Not larger, but not a divisor of the ranks per host: hosts of 3, nodes of 2.
  const std::vector<int64_t> two_hosts_of_three = {0, 0, 0, 3, 3, 3};
  EXPECT_NE(simulated_nodes_problem(keys(6, 2), two_hosts_of_three, 2).find("world ranks 2 and 3"), std::string::npos);
  EXPECT_EQ(simulated_nodes_problem(keys(6, 3), two_hosts_of_three, 3), "");
  // One host: any layout splits it.
  EXPECT_EQ(simulated_nodes_problem(keys(6, 3), std::vector<int64_t>(6, 0), 3), "");
}

// DTRAIN_RANKS_PER_NODE: every bad value names the variable, the value and the world size.
TEST(Topology, RanksPerNodeFromEnvNamesTheVariable) {
  auto error_for = [](const char* value, int world) {
    setenv("DTRAIN_RANKS_PER_NODE", value, 1);
    std::string what;
    try {
      ranks_per_node_from_env(world);
    } catch (const UsageError& e) {
      what = e.what();
    }
    unsetenv("DTRAIN_RANKS_PER_NODE");
    return what;
  };
  EXPECT_NE(error_for("0", 4).find("DTRAIN_RANKS_PER_NODE=0 must be a positive number"), std::string::npos);
  EXPECT_NE(error_for("-2", 4).find("DTRAIN_RANKS_PER_NODE=-2 must be a positive number"), std::string::npos);
  EXPECT_NE(error_for("two", 4).find("DTRAIN_RANKS_PER_NODE='two' is not an integer"), std::string::npos);
  EXPECT_NE(error_for("8", 4).find("DTRAIN_RANKS_PER_NODE=8 is more than the 4 ranks of this job"), std::string::npos);
  EXPECT_NE(error_for("3", 4).find("DTRAIN_RANKS_PER_NODE=3 does not divide the world size 4"), std::string::npos);
  EXPECT_EQ(error_for("2", 4), "");
  setenv("DTRAIN_RANKS_PER_NODE", "2", 1);
  EXPECT_EQ(ranks_per_node_from_env(4), 2);
  unsetenv("DTRAIN_RANKS_PER_NODE");
  EXPECT_EQ(ranks_per_node_from_env(4), std::nullopt);
}

std::vector<RankGpuChoice> one_host(int ranks, int gpus, bool masked_per_rank = false) {
  std::vector<RankGpuChoice> choices;
  for (int r = 0; r < ranks; ++r) {
    const int visible = masked_per_rank ? 1 : gpus;
    std::string bus;
    if (visible > 0) bus = "bus" + std::to_string(masked_per_rank ? r : device_index_for_local_rank(r, visible));
    choices.push_back({r, 0, "node-a", visible, bus});
  }
  return choices;
}

TEST(GpuPlacement, OneRankPerGpuIsFine) {
  EXPECT_EQ(gpu_placement_problem(one_host(4, 4), false), "");
  EXPECT_EQ(gpu_placement_problem(one_host(2, 8), false), "");
}

TEST(GpuPlacement, MoreRanksThanGpusNamesBothCountsUnlessSharingIsAllowed) {
  const std::string problem = gpu_placement_problem(one_host(4, 2), false);
  EXPECT_NE(problem.find("host node-a has 4 local ranks but only 2 GPUs"), std::string::npos) << problem;
  EXPECT_NE(problem.find("--allow-gpu-sharing"), std::string::npos) << problem;
  EXPECT_EQ(gpu_placement_problem(one_host(4, 2), true), "");
}

TEST(GpuPlacement, PerRankDeviceMaskingIsNotSharing) {
  // Slurm --gpus-per-task=1: every rank sees one GPU as index 0, but they are different GPUs.
  EXPECT_EQ(gpu_placement_problem(one_host(4, 1, true), false), "");
}

TEST(GpuPlacement, CountsPerHostNotPerJob) {
  std::vector<RankGpuChoice> choices = one_host(2, 2);
  choices.push_back({2, 1, "node-b", 2, "bus0"});
  choices.push_back({3, 1, "node-b", 2, "bus1"});
  EXPECT_EQ(gpu_placement_problem(choices, false), "") << "same bus ids on different hosts are different GPUs";
  choices.push_back({4, 1, "node-b", 2, "bus0"});
  EXPECT_NE(gpu_placement_problem(choices, false).find("host node-b has 3 local ranks but only 2 GPUs"),
            std::string::npos);
}

TEST(GpuPlacement, SomeRanksWithoutAGpuIsAnError) {
  std::vector<RankGpuChoice> choices = one_host(2, 2);
  choices.push_back({2, 1, "node-b", 0, ""});
  const std::string problem = gpu_placement_problem(choices, true);
  EXPECT_NE(problem.find("rank 2 on host node-b sees no GPU"), std::string::npos) << problem;
}

TEST(GpuPlacement, AllCpuIsFine) {
  EXPECT_EQ(gpu_placement_problem(one_host(3, 0, false), false), "");
}

}  // namespace
}  // namespace dtrain::runtime
