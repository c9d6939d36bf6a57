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
// Intra-node: NCCL for device buffers on GPU hosts; an MPI node communicator (our ring) for host
// buffers (and for everything on CPU-only hosts). fp16/bf16 are widened to fp32 for the whole
// operation and rounded once at the end.
//
// Cross-node wire format (cross_wire, the GPU trainer's gradient_wire_dtype): bf16 or fp16 narrows
// each shard, after the intra-node fp32 reduction, for the cross-node step only: the network (and
// the staging copies through the host) carry half the bytes; the cross-node ring adds in fp32 and
// carries its partial sums in 16 bits (MpiRingCommunicator::Sixteen::kPartials); the intra-node
// steps stay fp32. So with k nodes an element sees k roundings to 16 bits (the node's sum, then
// one per hop): two on 2 nodes. Ranks must agree on the format (checked at construction). Broadcast, all-gather and
// reduce-scatter delegate to a flat world communicator: our ring, for host and device buffers
// alike (device buffers staged through the host), so NCCL never spans nodes.
//
// Order (communicator.h): the sub-communicators see every call's steps in submission order, on
// every rank, and the control communicator (the consistency check) is used by one thread at a
// time. Host calls run as a whole on this communicator's worker thread, in order. A device call
// enqueues its steps on the caller's thread; if host calls are still running, it first waits for
// them (a host wait, only when host and device calls are mixed).
// The Work of a device all-reduce is the cross-node step's (staged on the host): it completes when
// that step has, and carries its failure. Errors of the NCCL steps are thrown at the call.
#include <memory>
#include <mutex>
#include <vector>

#include "comm/communicator.h"
#include "comm/diagnostics/stall_inspector.h"
#include "comm/host/comm_worker.h"
#include "comm/host/ring.h"
#include "runtime/mpi/mpi_scope.h"
#include "runtime/rank/rank_context.h"

namespace dtrain::comm {

class HierarchicalCommunicator final : public Communicator {
 public:
  // Collective over ctx.world(). use_nccl: device buffers take NCCL inside the node.
  HierarchicalCommunicator(const runtime::RankContext& ctx, bool use_nccl, RingTuning tuning,
                           DType cross_wire = DType::kF32);
  ~HierarchicalCommunicator() override;

  const char* name() const override { return "hierarchical"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Work submit(const Collective& call) override;
  void set_consistency_check(bool enabled) override { check_ = enabled; }

 private:
  // The whole all-reduce on fp32 buffers (work holds the input, in place). Host: runs to the end.
  // Device: enqueues, and returns the Works of the cross-node steps.
  // trace: Collective::trace, told each step (call_trace.h).
  std::vector<Work> all_reduce_f32(float* work, size_t count, Location where, CallTrace* trace);
  std::vector<Work> all_reduce(const Collective& call);
  // The cross-node sum of `count` fp32 elements at `data` on `comm`, in cross_wire_ on the wire.
  Work cross_node_sum(Communicator& comm, float* data, size_t count, Location where, CallTrace* trace);
  Communicator& intra(Location where) { return where.device ? *intra_ : *host_intra_; }
  Communicator& flat() { return *flat_; }

  runtime::MpiComm control_;
  StallChannel stall_{control_.get()};  // watches each call as a whole (its parts have their own)
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  bool uniform_nodes_ = true;
  bool direct_managed_ = false;  // DTRAIN_MPI_DEVICE_POINTERS=direct-managed: device calls refused
  int max_local_size_ = 1;
  bool check_ = true;
  DType cross_wire_ = DType::kF32;

  std::unique_ptr<Communicator> intra_;                     // this node's ranks (NCCL with GPUs)
  std::unique_ptr<Communicator> cross_;                     // uniform: ranks of my local index
  std::vector<std::unique_ptr<Communicator>> shard_cross_;  // uneven: [shard] -> owners, or null
  std::unique_ptr<Communicator> flat_;                      // the other collectives: our ring
  // Host buffers with GPUs: our ring (NCCL takes device buffers only). Without GPUs: intra_.
  std::unique_ptr<Communicator> own_host_intra_;
  Communicator* host_intra_ = nullptr;
  std::mutex submit_mutex_;  // one submission at a time, so every rank sees one order
  // Host calls run here, in order. Last member: its thread stops before the communicators it uses go.
  std::unique_ptr<CommWorker> worker_;
};

}  // namespace dtrain::comm
