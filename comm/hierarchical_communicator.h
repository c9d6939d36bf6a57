#pragma once
// The "hierarchical" backend (ChainerMN's hierarchical / two-dimensional all-reduce): a fast
// intra-node step, then our ring across nodes on each rank's shard only, then intra-node again.
//
// Equal node sizes (the usual case), L ranks per node:
//   1. intra-node reduce-scatter: local rank i gets shard i of the node's sum;
//   2. mpi-ring all-reduce of shard i across nodes, among the ranks of local index i;
//   3. intra-node all-gather.
// Each inter-node link then carries 1/L of the buffer. Uneven nodes (some with fewer ranks):
// an intra-node all-reduce, then each of Lmax shards is all-reduced across nodes by one owner per
// node (local rank = shard mod node size), then each owner broadcasts its shards inside its node.
//
// Intra-node: NCCL on GPU hosts; an MPI node communicator (our ring) on CPU-only hosts.
// fp16/bf16 are widened to fp32 for the whole operation and rounded once at the end.
// Broadcast, all-gather and reduce-scatter delegate to a flat world communicator.
#include <memory>
#include <vector>

#include "comm/comm_worker.h"
#include "comm/communicator.h"
#include "comm/ring.h"
#include "runtime/core/mpi_scope.h"
#include "runtime/core/rank_context.h"

namespace dtrain::comm {

class HierarchicalCommunicator final : public Communicator {
 public:
  // Collective over ctx.world(). use_nccl: the intra-node step runs on NCCL (device buffers).
  HierarchicalCommunicator(const core::RankContext& ctx, bool use_nccl, RingTuning tuning);
  ~HierarchicalCommunicator() override;

  const char* name() const override { return "hierarchical"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Work submit(const Collective& call) override;
  void set_consistency_check(bool enabled) override { check_ = enabled; }

 private:
  // The whole all-reduce on fp32 buffers (work holds the input, in place), enqueued or run inline.
  void all_reduce_f32(float* work, size_t count, Location where);
  void all_reduce(const Collective& call);

  core::MpiComm control_;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  bool uniform_nodes_ = true;
  int max_local_size_ = 1;
  bool check_ = true;

  std::unique_ptr<Communicator> intra_;                      // this node's ranks
  std::unique_ptr<Communicator> cross_;                      // uniform: ranks of my local index
  std::vector<std::unique_ptr<Communicator>> shard_cross_;   // uneven: [shard] -> owners, or null
  std::unique_ptr<Communicator> flat_;                       // the other collectives
  // Host calls run here, in order. Last member: its thread stops before the communicators it uses go.
  std::unique_ptr<CommWorker> worker_;
};

}  // namespace dtrain::comm
