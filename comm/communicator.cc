#include "comm/communicator.h"

#include <cstdint>

#include "runtime/base/error.h"

namespace dtrain::comm {

Work Communicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, Location where) {
  return submit(Collective{CollectiveKind::kAllReduce, send, recv, count, dtype, op, 0, where});
}

Work Communicator::broadcast(void* buffer, size_t count, DType dtype, int root, Location where) {
  return submit(Collective{CollectiveKind::kBroadcast, buffer, buffer, count, dtype, ReduceOp::kSum, root, where});
}

Work Communicator::all_gather(const void* send, void* recv, size_t count, DType dtype, Location where) {
  return submit(Collective{CollectiveKind::kAllGather, send, recv, count, dtype, ReduceOp::kSum, 0, where});
}

Work Communicator::reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                  Location where) {
  return submit(Collective{CollectiveKind::kReduceScatter, send, recv, count, dtype, op, 0, where});
}

void Communicator::barrier() {
  submit(Collective{CollectiveKind::kBarrier}).wait();
}

size_t send_elements(const Collective& call, int world_size) {
  switch (call.kind) {
    case CollectiveKind::kReduceScatter: return call.count * static_cast<size_t>(world_size);
    case CollectiveKind::kBarrier: return 0;
    default: return call.count;
  }
}

size_t recv_elements(const Collective& call, int world_size) {
  switch (call.kind) {
    case CollectiveKind::kAllGather: return call.count * static_cast<size_t>(world_size);
    case CollectiveKind::kBarrier: return 0;
    default: return call.count;
  }
}

void validate_call(const Collective& call, int world_size) {
  if (call.kind == CollectiveKind::kBarrier) return;
  // describe() builds a string: only on the failure path, since this runs on every call.
  DTRAIN_USAGE_CHECK(is_supported_dtype(call.dtype))
      << describe(call) << ": collectives take fp32, fp16 or bf16, not " << runtime::dtype_name(call.dtype);
  DTRAIN_USAGE_CHECK(call.kind != CollectiveKind::kBroadcast || (call.root >= 0 && call.root < world_size))
      << describe(call) << ": root " << call.root << " is not a rank of a communicator of size " << world_size;
  DTRAIN_USAGE_CHECK(call.count == 0 || (call.send != nullptr && call.recv != nullptr))
      << describe(call) << ": null buffer";
  if (call.count == 0 || call.send == call.recv) return;
  // In place is exact (collective.h); any other overlap would read input the call already overwrote.
  const size_t element = runtime::dtype_size(call.dtype);
  const auto send = reinterpret_cast<uintptr_t>(call.send);
  const auto recv = reinterpret_cast<uintptr_t>(call.recv);
  const size_t send_bytes = send_elements(call, world_size) * element;
  const size_t recv_bytes = recv_elements(call, world_size) * element;
  if (send >= recv + recv_bytes || recv >= send + send_bytes) return;  // disjoint
  const size_t block = call.count * element;
  const bool own_block = (call.kind == CollectiveKind::kAllGather && send > recv && (send - recv) % block == 0) ||
                         (call.kind == CollectiveKind::kReduceScatter && recv > send && (recv - send) % block == 0);
  DTRAIN_USAGE_CHECK(own_block) << describe(call)
                                << ": the send and receive buffers overlap partially (receive at send "
                                << (recv >= send ? "+ " : "- ") << (recv >= send ? recv - send : send - recv)
                                << " bytes); pass one buffer for in place, or two that do not overlap";
}

}  // namespace dtrain::comm
