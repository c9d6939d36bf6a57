#include "comm/hierarchical_communicator.h"

#include <algorithm>

#include "comm/consistency_check.h"
#include "comm/factory.h"
#include "comm/memory_ops.h"
#include "comm/mpi_ring_communicator.h"
#include "runtime/core/error.h"
#include "runtime/core/mpi_check.h"

namespace dtrain::comm {

namespace {

std::unique_ptr<Communicator> unchecked(std::unique_ptr<Communicator> comm) {
  comm->set_consistency_check(false);  // the hierarchical call has already checked
  return comm;
}

}  // namespace

HierarchicalCommunicator::HierarchicalCommunicator(const core::RankContext& ctx, bool use_nccl, RingTuning tuning)
    : control_(core::MpiComm::duplicate(ctx.world())) {
  const core::Topology& t = ctx.topology();
  rank_ = t.world_rank;
  size_ = t.world_size;
  local_rank_ = t.local_rank;
  local_size_ = t.local_size;

  int sizes[2] = {local_size_, -local_size_};
  int extremes[2] = {0, 0};
  DTRAIN_MPI_CHECK(MPI_Allreduce(sizes, extremes, 2, MPI_INT, MPI_MAX, control_.get()));
  max_local_size_ = extremes[0];
  uniform_nodes_ = extremes[0] == -extremes[1];

  intra_ = unchecked(use_nccl ? make_nccl_communicator(ctx.node())
                              : std::make_unique<MpiRingCommunicator>(ctx.node(), tuning));
  flat_ = unchecked(use_nccl ? make_nccl_communicator(ctx.world())
                             : std::make_unique<MpiRingCommunicator>(ctx.world(), tuning));
  if (uniform_nodes_) {
    cross_ = unchecked(std::make_unique<MpiRingCommunicator>(ctx.cross_node(), tuning));
  } else {
    // One communicator per shard: its owner on every node. MPI_Comm_split is collective over the
    // world, so every rank takes part in every split, joining those whose shard it owns.
    shard_cross_.resize(static_cast<size_t>(max_local_size_));
    for (int shard = 0; shard < max_local_size_; ++shard) {
      const bool owner = shard % local_size_ == local_rank_;
      MPI_Comm split = MPI_COMM_NULL;
      DTRAIN_MPI_CHECK(MPI_Comm_split(control_.get(), owner ? shard : MPI_UNDEFINED, t.node_index, &split));
      if (owner) {
        core::MpiComm owned(split);
        shard_cross_[static_cast<size_t>(shard)] = unchecked(std::make_unique<MpiRingCommunicator>(owned.get(), tuning));
      }
    }
  }
  worker_ = std::make_unique<CommWorker>();
}

HierarchicalCommunicator::~HierarchicalCommunicator() = default;

Work HierarchicalCommunicator::submit(const Collective& call) {
  validate_call(call, size_);
  if (call.kind != CollectiveKind::kAllReduce) {
    if (check_) check_same_collective(control_.get(), call);
    return flat_->submit(call);
  }
  if (call.where.device) {
    // Every step enqueues on the caller's stream; nothing here blocks on the GPU.
    if (check_) check_same_collective(control_.get(), call);
    all_reduce(call);
    return Work();
  }
  const bool check = check_;
  return worker_->submit([this, call, check] {
    if (check) check_same_collective(control_.get(), call);
    all_reduce(call);
  });
}

void HierarchicalCommunicator::all_reduce(const Collective& call) {
  const Location where = call.where;
  const float scale = call.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(size_) : 1.0f;
  if (call.dtype == DType::kF32) {
    copy_bytes(call.recv, call.send, call.count * sizeof(float), where);
    all_reduce_f32(static_cast<float*>(call.recv), call.count, where);
    if (scale != 1.0f) narrow_from_f32(static_cast<float*>(call.recv), scale, call.recv, DType::kF32, call.count, where);
    return;
  }
  core::Buffer wide = scratch_buffer(call.count * sizeof(float), where);
  auto* wide_f = static_cast<float*>(wide.data());
  widen_to_f32(call.send, call.dtype, wide_f, call.count, where);
  all_reduce_f32(wide_f, call.count, where);
  narrow_from_f32(wide_f, scale, call.recv, call.dtype, call.count, where);
}

void HierarchicalCommunicator::all_reduce_f32(float* work, size_t count, Location where) {
  if (count == 0) return;
  auto wait_host = [&](Work w) {
    if (!where.device) w.wait();  // device steps are ordered by the stream
  };
  const size_t lmax = static_cast<size_t>(max_local_size_);

  if (uniform_nodes_) {
    const size_t local = static_cast<size_t>(local_size_);
    if (local == 1) {
      wait_host(cross_->all_reduce(work, work, count, DType::kF32, ReduceOp::kSum, where));
      return;
    }
    // Pad to a multiple of L so every shard has the same length (NCCL's reduce-scatter requires it).
    const size_t shard = (count + local - 1) / local;
    core::Buffer padded;
    float* data = work;
    if (shard * local != count) {
      padded = scratch_buffer(shard * local * sizeof(float), where);
      data = static_cast<float*>(padded.data());
      copy_bytes(data, work, count * sizeof(float), where);
      zero_bytes(data + count, (shard * local - count) * sizeof(float), where);
    }
    float* mine = data + static_cast<size_t>(local_rank_) * shard;
    wait_host(intra_->reduce_scatter(data, mine, shard, DType::kF32, ReduceOp::kSum, where));
    wait_host(cross_->all_reduce(mine, mine, shard, DType::kF32, ReduceOp::kSum, where));
    wait_host(intra_->all_gather(mine, data, shard, DType::kF32, where));
    if (data != work) copy_bytes(work, data, count * sizeof(float), where);
    return;
  }

  // Uneven nodes.
  wait_host(intra_->all_reduce(work, work, count, DType::kF32, ReduceOp::kSum, where));
  const std::vector<size_t> offsets = even_chunks(count, max_local_size_);
  std::vector<Work> pending;
  for (size_t shard = 0; shard < lmax; ++shard) {
    if (shard_cross_[shard] == nullptr) continue;
    float* at = work + offsets[shard];
    pending.push_back(shard_cross_[shard]->all_reduce(at, at, offsets[shard + 1] - offsets[shard], DType::kF32,
                                                      ReduceOp::kSum, where));
  }
  for (Work& w : pending) wait_host(w);
  for (size_t shard = 0; shard < lmax; ++shard) {
    const int owner = static_cast<int>(shard) % local_size_;
    wait_host(intra_->broadcast(work + offsets[shard], offsets[shard + 1] - offsets[shard], DType::kF32, owner, where));
  }
}

}  // namespace dtrain::comm
