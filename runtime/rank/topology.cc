#include "runtime/rank/topology.h"

#include <algorithm>
#include <limits>

#include "runtime/base/env.h"
#include "runtime/base/error.h"

namespace dtrain::runtime {

Topology topology_from_node_keys(int world_rank, std::span<const int64_t> node_key_of_rank) {
  const int world_size = static_cast<int>(node_key_of_rank.size());
  DTRAIN_CHECK(world_rank >= 0 && world_rank < world_size)
      << "world rank " << world_rank << " outside a world of " << world_size;

  // Nodes are numbered in order of their lowest world rank, so node 0 holds rank 0.
  std::vector<int64_t> node_order;
  for (const int64_t key : node_key_of_rank) {
    if (std::find(node_order.begin(), node_order.end(), key) == node_order.end()) node_order.push_back(key);
  }
  const int64_t my_key = node_key_of_rank[static_cast<size_t>(world_rank)];

  Topology t;
  t.world_rank = world_rank;
  t.world_size = world_size;
  t.node_count = static_cast<int>(node_order.size());
  t.node_index = static_cast<int>(std::find(node_order.begin(), node_order.end(), my_key) - node_order.begin());
  t.local_rank = static_cast<int>(std::count(node_key_of_rank.begin(), node_key_of_rank.begin() + world_rank, my_key));
  t.local_size = static_cast<int>(std::count(node_key_of_rank.begin(), node_key_of_rank.end(), my_key));
  return t;
}

std::optional<int> ranks_per_node_from_env(int world_size) {
  const std::optional<int64_t> k = env_int("DTRAIN_RANKS_PER_NODE", 1, std::numeric_limits<int>::max());
  if (!k) return std::nullopt;
  DTRAIN_USAGE_CHECK(world_size % *k == 0) << "DTRAIN_RANKS_PER_NODE=" << *k << " does not divide the world size "
                                           << world_size << " (simulated nodes must all have the same number of ranks)";
  return static_cast<int>(*k);
}

}  // namespace dtrain::runtime
