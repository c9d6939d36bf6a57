#pragma once
// Where each rank sits: which node, which local index. Pure data and pure functions, so the
// placement rules are unit-testable without MPI.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace dtrain::runtime {

struct Topology {
  int world_rank = 0;
  int world_size = 1;
  int local_rank = 0;  // index among the ranks of this node, in world-rank order
  int local_size = 1;  // ranks on this node
  int node_index = 0;  // nodes numbered by their lowest world rank
  int node_count = 1;
  bool simulated_nodes = false;  // true when DTRAIN_RANKS_PER_NODE drew the node boundaries
  // The physical host, from MPI_Comm_split_type(SHARED), which GPU binding needs even when nodes
  // are simulated: two simulated nodes on one host must not both take GPU 0.
  int host_local_rank = 0;
  int host_local_size = 1;
  int host_index = 0;  // the physical host, numbered by its lowest world rank
};

// node_key_of_rank[r] identifies rank r's node (any value shared by exactly the ranks of one
// node). Returns the topology as seen from `world_rank`.
Topology topology_from_node_keys(int world_rank, std::span<const int64_t> node_key_of_rank);

// Simulated node key of `world_rank` for nodes of `ranks_per_node` consecutive ranks.
inline int64_t simulated_node_key(int world_rank, int ranks_per_node) {
  return world_rank / ranks_per_node;
}

// DTRAIN_RANKS_PER_NODE, validated against the world size: nullopt when unset; a UsageError
// naming the variable when it is not an integer, not positive, more than world_size, or does not
// divide world_size.
std::optional<int> ranks_per_node_from_env(int world_size);

// Simulated nodes split hosts, never join them: "" when every simulated node (node_key_of_rank) lies
// on one host (host_key_of_rank), else the problem, naming DTRAIN_RANKS_PER_NODE=ranks_per_node and
// the first host it overflows with its ranks.
std::string simulated_nodes_problem(std::span<const int64_t> node_key_of_rank,
                                    std::span<const int64_t> host_key_of_rank, int ranks_per_node);

}  // namespace dtrain::runtime
