#include "comm/mpi_ring_communicator.h"

#include <cstring>

#include "comm/host_reduce.h"
#include "runtime/core/error.h"
#include "runtime/core/mpi_check.h"

namespace dtrain::comm {

MpiRingCommunicator::MpiRingCommunicator(MPI_Comm comm, RingTuning tuning)
    : HostCommunicator(comm), ring_(mpi_comm(), tuning), tuning_(tuning) {}

void MpiRingCommunicator::run_host(const Collective& call) {
  switch (call.kind) {
    case CollectiveKind::kAllReduce: all_reduce(call); return;
    case CollectiveKind::kReduceScatter: reduce_scatter(call); return;
    case CollectiveKind::kAllGather: all_gather(call); return;
    case CollectiveKind::kBroadcast: ring_.broadcast(call.recv, call.count * core::dtype_size(call.dtype), call.root); return;
    case CollectiveKind::kBarrier: DTRAIN_MPI_CHECK(MPI_Barrier(mpi_comm())); return;
  }
}

void MpiRingCommunicator::all_reduce(const Collective& call) {
  const float scale = call.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(size()) : 1.0f;
  if (call.dtype == DType::kF32) {
    ring_.all_reduce(static_cast<const float*>(call.send), static_cast<float*>(call.recv), call.count, scale);
    return;
  }
  scratch_.resize(call.count);
  widen_to_f32(call.send, call.dtype, scratch_.data(), call.count);
  const bool small = call.count * sizeof(float) <= tuning_.small_bytes || call.count < static_cast<size_t>(size());
  if (small || size() == 1) {
    ring_.all_reduce(scratch_.data(), scratch_.data(), call.count, 1.0f);
    narrow_from_f32(scratch_.data(), scale, call.recv, call.dtype, call.count);
    return;
  }
  const std::vector<size_t> offsets = even_chunks(call.count, size());
  ring_.reduce_scatter(scratch_.data(), scratch_.data(), offsets, 1.0f);
  const size_t mine = offsets[static_cast<size_t>(rank())];
  const size_t esize = core::dtype_size(call.dtype);
  narrow_from_f32(scratch_.data() + mine, scale, static_cast<unsigned char*>(call.recv) + mine * esize, call.dtype,
                  offsets[static_cast<size_t>(rank()) + 1] - mine);
  ring_.all_gather(call.recv, offsets, esize);
}

void MpiRingCommunicator::reduce_scatter(const Collective& call) {
  const float scale = call.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(size()) : 1.0f;
  const size_t n = static_cast<size_t>(size());
  std::vector<size_t> offsets(n + 1);
  for (size_t i = 0; i <= n; ++i) offsets[i] = i * call.count;
  scratch_.resize(call.count * n);
  widen_to_f32(call.send, call.dtype, scratch_.data(), call.count * n);
  ring_.reduce_scatter(scratch_.data(), scratch_.data(), offsets, 1.0f);
  narrow_from_f32(scratch_.data() + offsets[static_cast<size_t>(rank())], scale, call.recv, call.dtype, call.count);
}

void MpiRingCommunicator::all_gather(const Collective& call) {
  const size_t esize = core::dtype_size(call.dtype);
  auto* recv = static_cast<unsigned char*>(call.recv);
  unsigned char* mine = recv + static_cast<size_t>(rank()) * call.count * esize;
  if (call.send != mine && call.count > 0) std::memcpy(mine, call.send, call.count * esize);
  const size_t n = static_cast<size_t>(size());
  std::vector<size_t> offsets(n + 1);
  for (size_t i = 0; i <= n; ++i) offsets[i] = i * call.count;
  ring_.all_gather(recv, offsets, esize);
}

}  // namespace dtrain::comm
