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
  const std::optional<int64_t> k =
      env_int("DTRAIN_RANKS_PER_NODE", std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  if (!k) return std::nullopt;
  DTRAIN_USAGE_CHECK(*k > 0) << "DTRAIN_RANKS_PER_NODE=" << *k
                             << " must be a positive number of ranks per simulated node (a divisor of the world size "
                             << world_size << ")";
  DTRAIN_USAGE_CHECK(*k <= world_size) << "DTRAIN_RANKS_PER_NODE=" << *k << " is more than the " << world_size
                                       << " ranks of this job (simulated nodes split the job's hosts)";
  DTRAIN_USAGE_CHECK(world_size % *k == 0) << "DTRAIN_RANKS_PER_NODE=" << *k << " does not divide the world size "
                                           << world_size << " (simulated nodes must all have the same number of ranks)";
  return static_cast<int>(*k);
}

std::string simulated_nodes_problem(std::span<const int64_t> node_key_of_rank,
                                    std::span<const int64_t> host_key_of_rank, int ranks_per_node) {
  const size_t n = node_key_of_rank.size();
  for (size_t r = 1; r < n; ++r) {
    // Ranks of a simulated node are consecutive: a node spans hosts where a rank's host differs
    // from its predecessor's within the same node.
    if (node_key_of_rank[r] != node_key_of_rank[r - 1] || host_key_of_rank[r] == host_key_of_rank[r - 1]) continue;
    const int64_t host = host_key_of_rank[r - 1];
    const auto on_host = std::count(host_key_of_rank.begin(), host_key_of_rank.end(), host);
    return "DTRAIN_RANKS_PER_NODE=" + std::to_string(ranks_per_node) + " puts world ranks " + std::to_string(r - 1) +
           " and " + std::to_string(r) + " on different hosts into one simulated node, and the host of rank " +
           std::to_string(r - 1) + " has " + std::to_string(on_host) +
           " rank(s): simulated nodes split a host, so use a divisor of the ranks per host";
  }
  return "";
}

}  // namespace dtrain::runtime
