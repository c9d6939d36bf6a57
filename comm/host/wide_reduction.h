#pragma once
// The precision policy of every 16-bit reduction, in one place: widen the input to fp32, reduce in
// fp32, round the result once (times the average's scale, if any). Each backend supplies only its
// fp32 operation (MPI_Allreduce, our ring, NCCL, the node-then-cross-node steps) and says which part
// of the fp32 result is its answer; this helper widens, runs it, and rounds that part.
//
// Scratch: the fp32 copy lives in memory this helper takes for the length of the call, from
// scratch_buffer() (host memory, or device memory from the caching allocator tagged with the call's
// stream, released as soon as the rounding is enqueued), unless the caller lends a buffer it keeps
// between calls (the mpi backend's host vector, the ring's widening slot in ring_scratch.h).
//
// Host memory: everything has finished when run() returns. Device memory: widening and rounding
// are enqueued on where.stream; a caller whose fp32 operation reads the copy from another stream
// (the ring's device memory) synchronizes that stream itself, in its operation and after run().
#include <cstddef>
#include <functional>

#include "comm/collective.h"

namespace dtrain::comm {

// The part of the fp32 result to round: `count` floats at `from`, rounded into `to` (in the
// input's dtype).
struct Rounding {
  const float* from = nullptr;
  void* to = nullptr;
  size_t count = 0;
};

struct WideInput {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  size_t count = 0;       // elements of `data`, widened into wide[0, count)
  size_t wide_count = 0;  // length of the fp32 copy; wide[count, wide_count) is zeroed (padding)
  float scale = 1.0f;     // applied in the rounding: the average's 1/n
  Location where;         // the memory of `data`, the copy and the result
  float* lent = nullptr;  // the caller's scratch of at least wide_count floats, or null
};

// Widens `in` into an fp32 copy, runs reduce(copy) (which returns the part to round), rounds that
// part once.
void reduce_widened(const WideInput& in, const std::function<Rounding(float* wide)>& reduce);

}  // namespace dtrain::comm
