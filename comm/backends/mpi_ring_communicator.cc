#include "comm/backends/mpi_ring_communicator.h"

#include <string>

#include "comm/diagnostics/consistency_check.h"
#include "comm/host/wide_reduction.h"
#include "runtime/base/error.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::comm {
namespace {

// A lane's part of a host all-reduce is at least this large: below it the lanes' hand-offs and
// message latencies cost more than the copies they share out.
constexpr size_t kMinLaneBytes = size_t{1} << 20;

}  // namespace

MpiRingCommunicator::MpiRingCommunicator(MPI_Comm comm, RingTuning tuning, Sixteen sixteen)
    : HostCommunicator(comm),
      tuning_(tuning),
      sixteen_(sixteen),
      device_mode_(device_pointer_mode()),
      host_ring_(mpi_comm(), tuning) {
  check_same_tuning(mpi_comm(), tuning_);
  // Staged calls run the ring piece by piece, direct ones on the whole buffer: different messages.
  check_same_setting(mpi_comm(), "DTRAIN_MPI_DEVICE_POINTERS", static_cast<uint64_t>(device_mode_), [](uint64_t mode) {
    return std::string("'") + device_pointer_mode_name(static_cast<DevicePointerMode>(mode)) + "'";
  });
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
  return tuning_.lanes > 1 && size() > 1 && !ring.memory().where().device &&
         bytes >= static_cast<size_t>(tuning_.lanes) * kMinLaneBytes;
}

void MpiRingCommunicator::in_parts(Ring& ring, size_t count, size_t bytes,
                                   const std::function<void(Ring&, size_t, size_t)>& part) {
  if (!takes_lanes(ring, bytes)) {
    part(ring, 0, count);
    return;
  }
  // Every rank gets here at the same call (same count, dtype and tuning), so the duplication,
  // a collective, matches.
  if (!lanes_) lanes_ = std::make_unique<RingLanes>(mpi_comm(), tuning_, tuning_.lanes - 1);
  lanes_->run(ring, count, part);
}

void MpiRingCommunicator::all_reduce(Ring& ring, const Collective& call) {
  const float scale = call.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(size()) : 1.0f;
  const size_t esize = runtime::dtype_size(call.dtype);
  if (call.dtype == DType::kF32) {
    const auto* send = static_cast<const float*>(call.send);
    auto* recv = static_cast<float*>(call.recv);
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
