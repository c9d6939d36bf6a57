#include "runtime/rank/rank_context.h"

#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/mpi/collective_usage_check.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::runtime {
namespace {

// The lowest world rank on this physical node serves as the node's key.
int64_t shared_memory_node_key(MPI_Comm world, int world_rank) {
  MPI_Comm shared = MPI_COMM_NULL;
  DTRAIN_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &shared));
  MpiComm owned(shared);
  int lowest = world_rank;
  DTRAIN_MPI_CHECK(MPI_Allreduce(&world_rank, &lowest, 1, MPI_INT, MPI_MIN, owned.get()));
  return lowest;
}

}  // namespace

RankContext RankContext::from_environment(MPI_Comm world) {
  int world_size = 0;
  DTRAIN_MPI_CHECK(MPI_Comm_size(world, &world_size));
  NodeLayout layout;
  collective_usage_check(world, [&] { layout.ranks_per_node = ranks_per_node_from_env(world_size); });
  return RankContext(world, layout);
}

RankContext::RankContext(MPI_Comm world, const NodeLayout& layout) : world_(MpiComm::duplicate(world)) {
  const int world_rank = world_.rank();
  const int world_size = world_.size();

  const int64_t host_key = shared_memory_node_key(world_.get(), world_rank);
  int64_t my_key = host_key;
  if (layout.ranks_per_node) {
    const int k = *layout.ranks_per_node;
    collective_usage_check(world_.get(), [&] {
      DTRAIN_USAGE_CHECK(k > 0) << "ranks per node must be positive, got " << k;
      DTRAIN_USAGE_CHECK(layout.allow_uneven || world_size % k == 0)
          << "ranks per node " << k << " does not divide the world size " << world_size;
    });
    my_key = simulated_node_key(world_rank, k);
  }

  const int64_t my_keys[2] = {my_key, host_key};
  std::vector<int64_t> all_keys(2 * static_cast<size_t>(world_size));
  DTRAIN_MPI_CHECK(MPI_Allgather(my_keys, 2, MPI_INT64_T, all_keys.data(), 2, MPI_INT64_T, world_.get()));
  std::vector<int64_t> node_keys(static_cast<size_t>(world_size));
  std::vector<int64_t> host_keys(static_cast<size_t>(world_size));
  for (size_t r = 0; r < node_keys.size(); ++r) {
    node_keys[r] = all_keys[2 * r];
    host_keys[r] = all_keys[2 * r + 1];
  }
  if (layout.ranks_per_node) {
    // Every rank holds every key, so every rank finds the same problem.
    collective_usage_check(world_.get(), [&] {
      const std::string problem = simulated_nodes_problem(node_keys, host_keys, *layout.ranks_per_node);
      DTRAIN_USAGE_CHECK(problem.empty()) << problem;
    });
  }
  topology_ = topology_from_node_keys(world_rank, node_keys);
  topology_.simulated_nodes = layout.ranks_per_node.has_value();
  const Topology host_view = topology_from_node_keys(world_rank, host_keys);
  topology_.host_local_rank = host_view.local_rank;
  topology_.host_local_size = host_view.local_size;
  topology_.host_index = host_view.node_index;

  node_ = MpiComm::split(world_.get(), topology_.node_index, world_rank);
  cross_node_ = MpiComm::split(world_.get(), topology_.local_rank, world_rank);
  DTRAIN_CHECK(node_.size() == topology_.local_size && node_.rank() == topology_.local_rank)
      << "node communicator disagrees with the computed topology";

  set_process_identity(world_rank, world_size, topology_.local_rank);
  DTRAIN_LOG(kDebug) << "node " << topology_.node_index << "/" << topology_.node_count << ", local rank "
                     << topology_.local_rank << "/" << topology_.local_size
                     << (topology_.simulated_nodes ? " (simulated nodes)" : "");
}

}  // namespace dtrain::runtime
