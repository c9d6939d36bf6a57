#include "comm/backends/hierarchical_communicator.h"

#include <algorithm>
#include <string>

#include "comm/backends/mpi_ring_communicator.h"
#include "comm/backends/nccl_backend.h"
#include "comm/diagnostics/consistency_check.h"
#include "comm/host/memory_ops.h"
#include "comm/host/mpi_features.h"
#include "comm/host/wide_reduction.h"
#include "runtime/base/error.h"
#include "runtime/base/steady_seconds.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::comm {

namespace {

std::unique_ptr<Communicator> unchecked(std::unique_ptr<Communicator> comm) {
  comm->set_consistency_check(false);  // the hierarchical call has already checked
  return comm;
}

// Runs one phase of an all-reduce (`enqueue` starts it) and reports it to `trace` when there is
// one: a host phase runs to its end here and is timed by the clock around it; a device phase is
// only enqueued, between the trace's two device_phase calls (which record events on the stream).
template <typename Enqueue>
Work traced(CallTrace* trace, const char* name, size_t bytes, Location where, Enqueue enqueue) {
  if (trace == nullptr) return enqueue();
  CallPhase phase;
  phase.name = name;
  phase.bytes = static_cast<int64_t>(bytes);
  if (where.device) {
    trace->device_phase(phase, where.stream, false);
    Work w = enqueue();
    trace->device_phase(phase, where.stream, true);
    return w;
  }
  phase.begin = runtime::steady_seconds();
  Work w = enqueue();
  w.wait();
  phase.end = runtime::steady_seconds();
  trace->host_phase(phase);
  return w;
}

}  // namespace

HierarchicalCommunicator::HierarchicalCommunicator(const runtime::RankContext& ctx, bool use_nccl, RingTuning tuning,
                                                   DType cross_wire)
    : control_(runtime::MpiComm::duplicate(ctx.world())), cross_wire_(cross_wire) {
  DTRAIN_USAGE_CHECK(cross_wire == DType::kF32 || cross_wire == DType::kBF16 || cross_wire == DType::kF16)
      << "cross-node wire format must be fp32, bf16 or fp16, not " << runtime::dtype_name(cross_wire);
  const runtime::Topology& t = ctx.topology();
  rank_ = t.world_rank;
  size_ = t.world_size;
  local_rank_ = t.local_rank;
  local_size_ = t.local_size;
  runtime::require_mpi_thread_multiple("the hierarchical communicator runs host calls on its own thread");
  check_same_tuning(control_.get(), tuning);

  int sizes[2] = {local_size_, -local_size_};
  int extremes[2] = {0, 0};
  DTRAIN_MPI_CHECK(MPI_Allreduce(sizes, extremes, 2, MPI_INT, MPI_MAX, control_.get()));
  max_local_size_ = extremes[0];
  uniform_nodes_ = extremes[0] == -extremes[1];

  // The communicators that span nodes keep the ring: shared memory cannot span real nodes, and on
  // simulated ones (DTRAIN_RANKS_PER_NODE) the ring is what real nodes would run.
  RingTuning across = tuning;
  across.shm = false;
  direct_managed_ = device_pointer_mode() == DevicePointerMode::kDirectManaged;
  intra_ = unchecked(use_nccl ? make_nccl_communicator(ctx.node())
                              : std::make_unique<MpiRingCommunicator>(ctx.node(), tuning));
  // The collectives that span every node at once go over our ring, device buffers staged through
  // the host, so NCCL never spans nodes (no world NCCL communicator: none of its memory and set-up
  // on a large job, and simulated nodes may share a GPU).
  flat_ = unchecked(std::make_unique<MpiRingCommunicator>(ctx.world(), across));
  host_intra_ = intra_.get();
  if (use_nccl) {
    own_host_intra_ = unchecked(std::make_unique<MpiRingCommunicator>(ctx.node(), tuning));
    host_intra_ = own_host_intra_.get();
  }
  // Ranks that disagree on the wire would exchange messages of different sizes.
  check_same_setting(control_.get(), "the cross-node wire format (gradient_wire_dtype)",
                     static_cast<uint64_t>(cross_wire),
                     [](uint64_t v) { return std::string(runtime::dtype_name(static_cast<DType>(v))); });
  const auto sixteen =
      cross_wire == DType::kF32 ? MpiRingCommunicator::Sixteen::kOneRounding : MpiRingCommunicator::Sixteen::kPartials;
  if (uniform_nodes_) {
    cross_ = unchecked(std::make_unique<MpiRingCommunicator>(ctx.cross_node(), across, sixteen));
  } else {
    // One communicator per shard: its owner on every node. MPI_Comm_split is collective over the
    // world, so every rank takes part in every split, joining those whose shard it owns.
    shard_cross_.resize(static_cast<size_t>(max_local_size_));
    for (int shard = 0; shard < max_local_size_; ++shard) {
      const bool owner = shard % local_size_ == local_rank_;
      MPI_Comm split = MPI_COMM_NULL;
      DTRAIN_MPI_CHECK(MPI_Comm_split(control_.get(), owner ? shard : MPI_UNDEFINED, t.node_index, &split));
      if (owner) {
        runtime::MpiComm owned(split);
        shard_cross_[static_cast<size_t>(shard)] =
            unchecked(std::make_unique<MpiRingCommunicator>(owned.get(), across, sixteen));
      }
    }
  }
  worker_ = std::make_unique<CommWorker>();
}

HierarchicalCommunicator::~HierarchicalCommunicator() {
  worker_->stop();
}

Work HierarchicalCommunicator::submit(const Collective& call) {
  validate_call(call, size_);
  std::lock_guard lock(submit_mutex_);
  if (!call.where.device) {
    const bool check = check_;
    return worker_->submit([this, call, check] {
      StallChannel::Operation watched(stall_, name(), call);
      if (check) check_same_collective(control_.get(), call);
      if (call.kind == CollectiveKind::kAllReduce) {
        all_reduce(call);
      } else {
        flat().submit(call).wait();
      }
    });
  }
  // Direct-managed mode hands MPI the buffers as they are, on the contract that they are managed
  // memory; this backend's own device scratch (the padded shards, the narrowed wire) is not, and MPI
  // would crash reading it.
  DTRAIN_USAGE_CHECK(!direct_managed_)
      << "DTRAIN_MPI_DEVICE_POINTERS=direct-managed does not work with the hierarchical backend on device "
         "buffers (its scratch is device memory): use stage, direct (an MPI with CUDA support), or the mpi-ring "
         "backend";
  // This call's steps go to the sub-communicators after every earlier host call's, and the check
  // below must not overlap a host call's check on the worker.
  worker_->wait_idle();
  if (check_) {
    StallChannel::Operation watched(stall_, name(), call);
    check_same_collective(control_.get(), call);
  }
  if (call.kind != CollectiveKind::kAllReduce) return flat().submit(call);
  return Work::all_of(all_reduce(call));
}

std::vector<Work> HierarchicalCommunicator::all_reduce(const Collective& call) {
  const Location where = call.where;
  const float scale = call.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(size_) : 1.0f;
  if (call.dtype == DType::kF32) {
    copy_bytes(call.recv, call.send, call.count * sizeof(float), where);
    std::vector<Work> cross = all_reduce_f32(static_cast<float*>(call.recv), call.count, where, call.trace);
    if (scale != 1.0f)
      narrow_from_f32(static_cast<float*>(call.recv), scale, call.recv, DType::kF32, call.count, where);
    return cross;
  }
  // Device scratch is tagged with the caller's stream; the staged cross-node step reads and writes
  // it on its own streams, but the caller's stream waits for them before any later use.
  std::vector<Work> cross;
  reduce_widened({call.send, call.dtype, call.count, call.count, scale, where, nullptr}, [&](float* wide) {
    cross = all_reduce_f32(wide, call.count, where, call.trace);
    return Rounding{wide, call.recv, call.count};
  });
  return cross;
}

std::vector<Work> HierarchicalCommunicator::all_reduce_f32(float* work, size_t count, Location where,
                                                           CallTrace* trace) {
  std::vector<Work> cross;  // device: the cross-node steps, still running
  if (count == 0) return cross;
  // Host steps run one after another (on the worker thread); device steps are ordered by the stream.
  auto step = [&](Work w, bool cross_node) {
    if (!where.device) {
      w.wait();
    } else if (cross_node) {
      cross.push_back(std::move(w));
    }
  };
  const size_t lmax = static_cast<size_t>(max_local_size_);
  const size_t wire = runtime::dtype_size(cross_wire_);
  constexpr size_t f32 = sizeof(float);

  if (uniform_nodes_) {
    const size_t local = static_cast<size_t>(local_size_);
    if (local == 1) {
      step(traced(trace, kPhaseCrossNode, count * wire, where,
                  [&] { return cross_node_sum(*cross_, work, count, where, trace); }),
           true);
      return cross;
    }
    // Pad to a multiple of L so every shard has the same length (NCCL's reduce-scatter requires it).
    const size_t shard = (count + local - 1) / local;
    runtime::Buffer padded;
    float* data = work;
    if (shard * local != count) {
      padded = scratch_buffer(shard * local * f32, where);
      data = static_cast<float*>(padded.data());
      copy_bytes(data, work, count * f32, where);
      zero_bytes(data + count, (shard * local - count) * f32, where);
    }
    float* mine = data + static_cast<size_t>(local_rank_) * shard;
    step(traced(trace, kPhaseIntraReduceScatter, shard * local * f32, where,
                [&] { return intra(where).reduce_scatter(data, mine, shard, DType::kF32, ReduceOp::kSum, where); }),
         false);
    step(traced(trace, kPhaseCrossNode, shard * wire, where,
                [&] { return cross_node_sum(*cross_, mine, shard, where, trace); }),
         true);
    step(traced(trace, kPhaseIntraAllGather, shard * local * f32, where,
                [&] { return intra(where).all_gather(mine, data, shard, DType::kF32, where); }),
         false);
    if (data != work) copy_bytes(work, data, count * f32, where);
    return cross;
  }

  // Uneven nodes.
  step(traced(trace, kPhaseIntraAllReduce, count * f32, where,
              [&] { return intra(where).all_reduce(work, work, count, DType::kF32, ReduceOp::kSum, where); }),
       false);
  const std::vector<size_t> offsets = even_chunks(count, max_local_size_);
  std::vector<Work> pending;
  size_t owned = 0;
  for (size_t shard = 0; shard < lmax; ++shard) owned += shard_cross_[shard] ? offsets[shard + 1] - offsets[shard] : 0;
  // One phase for this rank's shards together (their rings run back to back on the host).
  traced(trace, kPhaseCrossNode, owned * wire, where, [&] {
    for (size_t shard = 0; shard < lmax; ++shard) {
      if (shard_cross_[shard] == nullptr) continue;
      float* at = work + offsets[shard];
      pending.push_back(cross_node_sum(*shard_cross_[shard], at, offsets[shard + 1] - offsets[shard], where, trace));
    }
    return Work::all_of(pending);
  });
  for (Work& w : pending) step(std::move(w), true);
  traced(trace, kPhaseIntraBroadcast, count * f32, where, [&] {
    for (size_t shard = 0; shard < lmax; ++shard) {
      const int owner = static_cast<int>(shard) % local_size_;
      step(
          intra(where).broadcast(work + offsets[shard], offsets[shard + 1] - offsets[shard], DType::kF32, owner, where),
          false);
    }
    return Work();
  });
  return cross;
}

Work HierarchicalCommunicator::cross_node_sum(Communicator& comm, float* data, size_t count, Location where,
                                              CallTrace* trace) {
  // The staged device path reports its pieces to the trace.
  auto sum = [&](void* buffer, DType dtype) {
    Collective call;
    call.send = buffer;
    call.recv = buffer;
    call.count = count;
    call.dtype = dtype;
    call.where = where;
    call.trace = trace;
    return comm.submit(call);
  };
  // One node: nothing crosses a network, so nothing is narrowed.
  if (cross_wire_ == DType::kF32 || comm.size() == 1) return sum(data, DType::kF32);
  // Device scratch follows the caller's stream, which waits for the staged step (all_reduce above).
  runtime::Buffer wire = scratch_buffer(count * runtime::dtype_size(cross_wire_), where);
  narrow_from_f32(data, 1.0f, wire.data(), cross_wire_, count, where);
  Work w = sum(wire.data(), cross_wire_);
  if (!where.device) w.wait();  // host: the widening below reads the result now
  widen_to_f32(wire.data(), cross_wire_, data, count, where);
  return w;
}

}  // namespace dtrain::comm
