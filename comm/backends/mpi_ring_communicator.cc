#include "comm/backends/mpi_ring_communicator.h"

#include <algorithm>
#include <string>

#include "comm/diagnostics/consistency_check.h"
#include "comm/host/memory_ops.h"
#include "comm/host/wide_reduction.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::comm {
namespace {

// A lane's part of a host all-reduce is at least this large: below it the lanes' hand-offs and
// message latencies cost more than the copies they share out.
constexpr size_t kMinLaneBytes = size_t{1} << 20;

}  // namespace

MpiRingCommunicator::MpiRingCommunicator(MPI_Comm comm, RingTuning tuning, Sixteen sixteen, DType wire)
    : HostCommunicator(comm),
      tuning_(tuning),
      sixteen_(wire == DType::kF32 ? sixteen : Sixteen::kPartials),
      wire_(wire),
      device_mode_(device_pointer_mode()),
      host_ring_(mpi_comm(), tuning) {
  DTRAIN_USAGE_CHECK(wire == DType::kF32 || wire == DType::kBF16 || wire == DType::kF16)
      << "the mpi-ring's cross-node wire format must be fp32, bf16 or fp16, not " << runtime::dtype_name(wire);
  check_same_tuning(mpi_comm(), tuning_);
  // Ranks that disagree on the wire would exchange messages of different sizes.
  check_same_setting(mpi_comm(), "the cross-node wire format (gradient_wire_dtype)", static_cast<uint64_t>(wire_),
                     [](uint64_t v) { return std::string(runtime::dtype_name(static_cast<DType>(v))); });
  // Staged calls run the ring piece by piece, direct ones on the whole buffer: different messages.
  check_same_setting(mpi_comm(), "DTRAIN_MPI_DEVICE_POINTERS", static_cast<uint64_t>(device_mode_), [](uint64_t mode) {
    return std::string("'") + device_pointer_mode_name(static_cast<DevicePointerMode>(mode)) + "'";
  });
  // The lanes' communicators are duplicated here, where every rank is anyway in a collective, and
  // not at the first large call: a rank that failed that call (an injected fault) would leave the
  // others inside MPI_Comm_dup, matched against its next collective.
  if (tuning_.lanes > 1 && size() > 1) lanes_ = std::make_unique<RingLanes>(mpi_comm(), tuning_, tuning_.lanes - 1);
}

bool MpiRingCommunicator::narrows(const Collective& call) const {
  return wire_ != DType::kF32 && call.kind == CollectiveKind::kAllReduce && call.dtype == DType::kF32 && size() > 1 &&
         call.count > 0;
}

Collective MpiRingCommunicator::on_wire(const Collective& call, void* wire) const {
  Collective narrow = call;
  narrow.send = wire;
  narrow.recv = wire;
  narrow.dtype = wire_;
  narrow.op = ReduceOp::kSum;  // an average is scaled in fp32, after widening
  return narrow;
}

Work MpiRingCommunicator::submit(const Collective& call) {
  // Host calls narrow on the worker (run()); device calls here, on the caller's stream, before the
  // staging copies, which then carry the narrow values.
  if (!call.where.device || !narrows(call)) return HostCommunicator::submit(call);
  validate_call(call, size());
  const Location where = call.where;
  // Stream-ordered scratch: the caller's stream waits for the collective (staged or direct) before
  // the widening below, so releasing it once that is enqueued is safe.
  void* wire = nullptr;
  const runtime::Buffer held = device_wire(call.count * runtime::dtype_size(wire_), where, &wire);
  narrow_from_f32(static_cast<const float*>(call.send), 1.0f, wire, wire_, call.count, where);
  Work work = HostCommunicator::submit(on_wire(call, wire));
  auto* recv = static_cast<float*>(call.recv);
  widen_to_f32(wire, wire_, recv, call.count, where);
  if (call.op == ReduceOp::kAverage) {
    narrow_from_f32(recv, 1.0f / static_cast<float>(size()), recv, DType::kF32, call.count, where);
  }
  return work;
}

runtime::Buffer MpiRingCommunicator::device_wire(size_t bytes, const Location& where, void** data) {
  if (device_mode_ != DevicePointerMode::kDirectManaged) {
    runtime::Buffer wire = scratch_buffer(bytes, where);
    *data = wire.data();
    return wire;
  }
  std::lock_guard lock(managed_wire_mutex_);
  if (!managed_wire_memory_) managed_wire_memory_ = make_device_ring_memory(true);
  auto slot = managed_wires_.find(where.stream);
  if (slot == managed_wires_.end() || slot->second.second < bytes) {
    // At least double: outgrown buffers stay allocated, so their sum stays within twice the largest.
    const size_t grown = std::max(bytes, slot == managed_wires_.end() ? size_t{0} : 2 * slot->second.second);
    managed_wires_.insert_or_assign(
        where.stream,
        std::make_pair(managed_wire_memory_->allocate((grown + sizeof(float) - 1) / sizeof(float)), grown));
    slot = managed_wires_.find(where.stream);
  }
  *data = slot->second.first.get();
  return runtime::Buffer();
}

Ring& MpiRingCommunicator::ring_for(const Collective& call) {
  if (!call.where.device) return host_ring_;
  if (!device_ring_) {
    device_ring_ = std::make_unique<Ring>(mpi_comm(), tuning_,
                                          make_device_ring_memory(device_mode_ == DevicePointerMode::kDirectManaged));
  }
  return *device_ring_;
}

void MpiRingCommunicator::run(const Collective& call) {
  Ring& ring = ring_for(call);
  switch (call.kind) {
    case CollectiveKind::kAllReduce: all_reduce(ring, call); return;
    case CollectiveKind::kReduceScatter: reduce_scatter(ring, call); return;
    case CollectiveKind::kAllGather: all_gather(ring, call); return;
    case CollectiveKind::kBroadcast:
      ring.broadcast(call.recv, call.count * runtime::dtype_size(call.dtype), call.root);
      return;
    case CollectiveKind::kBarrier: DTRAIN_MPI_CHECK(MPI_Barrier(mpi_comm())); return;
  }
}

bool MpiRingCommunicator::takes_lanes(Ring& ring, size_t bytes) const {
  return lanes_ && !ring.memory().where().device && bytes >= static_cast<size_t>(tuning_.lanes) * kMinLaneBytes;
}

void MpiRingCommunicator::in_parts(Ring& ring, size_t count, size_t bytes,
                                   const std::function<void(Ring&, size_t, size_t)>& part) {
  if (!takes_lanes(ring, bytes)) {
    part(ring, 0, count);
    return;
  }
  ++lane_runs_;
  lanes_->run(ring, count, part);
}

SharedMemoryAllReduce* MpiRingCommunicator::shared_memory_for(Ring& ring, size_t bytes) {
  if (!tuning_.shm || size() == 1 || ring.memory().where().device || bytes < tuning_.shm_min_bytes) return nullptr;
  if (!shm_tried_) {
    shm_tried_ = true;
    std::string why;
    shm_ = SharedMemoryAllReduce::create(mpi_comm(), tuning_.shm_chunk_bytes, &why);
    if (!shm_ && rank() == 0 && !why.empty()) {
      DTRAIN_LOG(kWarn) << "mpi-ring: no shared-memory all-reduce (" << why << "); the ring carries "
                        << "large host all-reduces";
    }
  }
  return shm_.get();
}

void MpiRingCommunicator::all_reduce(Ring& ring, const Collective& call) {
  const float scale = call.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(size()) : 1.0f;
  const size_t esize = runtime::dtype_size(call.dtype);
  if (narrows(call)) {
    // Host memory (device calls were narrowed at submit): the 16-bit copy sits in the ring's wire slot.
    const Location host = Location::host();
    void* wire = ring.scratch(RingScratch::kWire, (call.count * runtime::dtype_size(wire_) + 3) / sizeof(float));
    narrow_from_f32(static_cast<const float*>(call.send), 1.0f, wire, wire_, call.count, host);
    all_reduce(ring, on_wire(call, wire));
    widen_to_f32(wire, wire_, static_cast<float*>(call.recv), call.count, host);
    if (scale != 1.0f) narrow_from_f32(static_cast<float*>(call.recv), scale, call.recv, DType::kF32, call.count, host);
    return;
  }
  if (call.dtype == DType::kF32) {
    const auto* send = static_cast<const float*>(call.send);
    auto* recv = static_cast<float*>(call.recv);
    if (SharedMemoryAllReduce* shm = shared_memory_for(ring, call.count * esize)) {
      shm->all_reduce(send, recv, call.count, call.dtype, scale);
      return;
    }
    in_parts(ring, call.count, call.count * esize,
             [&](Ring& r, size_t begin, size_t n) { r.all_reduce(send + begin, recv + begin, n, scale); });
    return;
  }
  RingMemory& memory = ring.memory();
  const bool small = call.count * sizeof(float) <= tuning_.small_bytes || call.count < static_cast<size_t>(size());
  if (sixteen_ == Sixteen::kPartials && !small && size() > 1 && !memory.where().device) {
    memory.copy(call.recv, call.send, call.count * esize);
    auto* data = static_cast<unsigned char*>(call.recv);
    in_parts(ring, call.count, call.count * esize,
             [&](Ring& r, size_t begin, size_t n) { r.all_reduce_16(data + begin * esize, n, call.dtype, scale); });
    return;
  }
  // Widened chunk by chunk into the shared slots, summed in fp32, rounded once on the way out.
  if (SharedMemoryAllReduce* shm = shared_memory_for(ring, call.count * sizeof(float))) {
    shm->all_reduce(call.send, call.recv, call.count, call.dtype, scale);
    return;
  }
  // The fp32 copy sits in the ring's widening slot; device ring memory converts on its own stream,
  // which is synchronized before MPI reads the copy and before the result is handed on.
  const Location where = memory.where();
  float* slot = ring.scratch(RingScratch::kWiden, call.count);
  if (small || size() == 1) {
    reduce_widened({call.send, call.dtype, call.count, call.count, scale, where, slot}, [&](float* wide) {
      memory.wait();
      ring.all_reduce(wide, wide, call.count, 1.0f);
      return Rounding{wide, call.recv, call.count};
    });
    memory.wait();
    return;
  }
  const std::vector<size_t> offsets = even_chunks(call.count, size());
  const size_t mine = offsets[static_cast<size_t>(rank())];
  reduce_widened({call.send, call.dtype, call.count, call.count, scale, where, slot}, [&](float* wide) {
    memory.wait();
    ring.reduce_scatter(wide, wide, offsets, 1.0f);
    return Rounding{wide + mine, static_cast<unsigned char*>(call.recv) + mine * esize,
                    offsets[static_cast<size_t>(rank()) + 1] - mine};
  });
  memory.wait();
  ring.all_gather(call.recv, offsets, esize);
}

void MpiRingCommunicator::reduce_scatter(Ring& ring, const Collective& call) {
  const float scale = call.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(size()) : 1.0f;
  const size_t n = static_cast<size_t>(size());
  std::vector<size_t> offsets(n + 1);
  for (size_t i = 0; i <= n; ++i) offsets[i] = i * call.count;
  RingMemory& memory = ring.memory();
  const size_t total = call.count * n;
  float* slot = ring.scratch(RingScratch::kWiden, total);
  reduce_widened({call.send, call.dtype, total, total, scale, memory.where(), slot}, [&](float* wide) {
    memory.wait();
    ring.reduce_scatter(wide, wide, offsets, 1.0f);
    return Rounding{wide + offsets[static_cast<size_t>(rank())], call.recv, call.count};
  });
  memory.wait();
}

void MpiRingCommunicator::all_gather(Ring& ring, const Collective& call) {
  const size_t esize = runtime::dtype_size(call.dtype);
  auto* recv = static_cast<unsigned char*>(call.recv);
  unsigned char* mine = recv + static_cast<size_t>(rank()) * call.count * esize;
  ring.memory().copy(mine, call.send, call.count * esize);
  const size_t n = static_cast<size_t>(size());
  std::vector<size_t> offsets(n + 1);
  for (size_t i = 0; i <= n; ++i) offsets[i] = i * call.count;
  ring.all_gather(recv, offsets, esize);
}

}  // namespace dtrain::comm
