// Placement rules without MPI: node numbering and the GPU-sharing verdict.
#include "runtime/rank/topology.h"

#include <gtest/gtest.h>

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
