#pragma once
// The rank context: this process's place in the job and the communicators that follow from it.
//
// Built once, collectively over the world communicator, after MpiScope:
//   world()      a duplicate of the world communicator (dtrain's own message space);
//   node()       the ranks of this node (MPI_Comm_split_type SHARED, or simulated nodes);
//   cross_node() the ranks that share this rank's local index, one per node, in node order.
// Every communicator uses MPI_ERRORS_RETURN. DTRAIN_RANKS_PER_NODE=k splits the world into
// simulated nodes of k consecutive ranks, so multi-node code paths run on one host.
#include <mpi.h>

#include <optional>

#include "runtime/mpi/mpi_scope.h"
#include "runtime/rank/topology.h"

namespace dtrain::runtime {

struct NodeLayout {
  // nullopt: real nodes from MPI_Comm_split_type(SHARED); k: simulated nodes of k consecutive ranks.
  std::optional<int> ranks_per_node;
  // Simulated layouts only: allow a last node with fewer ranks (k not dividing the world size).
  bool allow_uneven = false;
};

class RankContext {
 public:
  // Collective over `world`. Reads DTRAIN_RANKS_PER_NODE.
  static RankContext from_environment(MPI_Comm world = MPI_COMM_WORLD);

  // Collective over `world`, with an explicit layout (tests use this for uneven nodes).
  RankContext(MPI_Comm world, const NodeLayout& layout);

  const Topology& topology() const { return topology_; }
  MPI_Comm world() const { return world_.get(); }
  MPI_Comm node() const { return node_.get(); }
  MPI_Comm cross_node() const { return cross_node_.get(); }

 private:
  Topology topology_;
  MpiComm world_;
  MpiComm node_;
  MpiComm cross_node_;
};

}  // namespace dtrain::runtime
