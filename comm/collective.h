#pragma once
// The description of one collective call, shared by every backend, the consistency check and the
// benchmark. Plain data; pointers are borrowed from the caller.
#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/call_trace.h"
#include "runtime/memory/dtype.h"

namespace dtrain::comm {

using runtime::DType;

enum class ReduceOp : uint8_t { kSum, kAverage };
enum class CollectiveKind : uint8_t { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kBarrier };

const char* reduce_op_name(ReduceOp op);
const char* collective_name(CollectiveKind kind);

// Where a call's buffers live.
//   host: any host memory. The call returns a Work; the buffers must stay untouched until it is done.
//   device: CUDA memory ordered on `stream` (a cudaStream_t). The call only enqueues: work queued on
//     `stream` afterwards sees the result, and the host is never blocked.
struct Location {
  bool device = false;
  void* stream = nullptr;

  static Location host() { return {}; }
  static Location gpu(void* cuda_stream) { return {true, cuda_stream}; }
};

// Buffer conventions follow NCCL:
//   all_reduce:     send, recv hold `count` elements.
//   broadcast:      recv holds `count` elements (send == recv); `root` sends.
//   all_gather:     send holds `count`; recv holds count x world size, rank r's block at r x count.
//   reduce_scatter: send holds count x world size; recv holds `count`, the reduced block of this rank.
// In place: send == recv (all_gather: send == recv + rank x count; reduce_scatter: recv == send + rank x count).
struct Collective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  Location where;
  // Where the call reports its phases (call_trace.h); null: nowhere. Not part of what the
  // consistency check compares.
  CallTrace* trace = nullptr;
};

// "all_reduce(count=1000, fp32, sum)": for error messages.
std::string describe(const Collective& c);

// fp32, fp16 and bf16 only: collectives reduce floating-point gradients.
bool is_supported_dtype(DType dtype);

}  // namespace dtrain::comm
