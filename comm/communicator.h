#pragma once
// The collective communication interface every backend implements: all-reduce (sum, average),
// broadcast from any root, all-gather, reduce-scatter and barrier, on fp32, fp16 or bf16 buffers
// in host or device memory, in place or out of place.
//
// Contract:
// - Every rank of the communicator makes the same calls in the same order (as with MPI and NCCL).
//   By default each call first verifies that (consistency_check.h), so a rank passing a different
//   count or dtype gets an Error on every rank instead of a hang.
// - Any count >= 0 on any world size >= 1, including counts smaller than the world size.
// - fp16 and bf16 are reduced in fp32 and rounded once. Average divides in fp32 before rounding.
// - Host buffers: the call returns a Work; the caller keeps the buffers alive and untouched until
//   wait() returns. Operations of one communicator run in submission order on its own thread.
// - Device buffers (Location::gpu(stream)): the call enqueues on `stream` and returns without
//   blocking the host; later work on `stream` sees the result. The returned Work may also be waited.
// - Argument errors (null buffers, bad root, unsupported dtype) throw UsageError at the call.
//   Failures during the operation surface from Work::wait() as typed Errors (MpiError, NcclError...).
#include <cstddef>

#include "comm/collective.h"
#include "comm/work.h"

namespace dtrain::comm {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual const char* name() const = 0;  // "mpi-ring", "mpi", "nccl", "hierarchical"
  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual Work submit(const Collective& call) = 0;
  virtual void set_consistency_check(bool enabled) = 0;

  Work all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, Location where = {});
  Work broadcast(void* buffer, size_t count, DType dtype, int root, Location where = {});
  Work all_gather(const void* send, void* recv, size_t count, DType dtype, Location where = {});
  Work reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, Location where = {});
  void barrier();
};

// Local argument checks shared by all backends; UsageError naming the problem.
void validate_call(const Collective& call, int world_size);

// Elements of `call.send` and `call.recv` (0 for a barrier).
size_t send_elements(const Collective& call, int world_size);
size_t recv_elements(const Collective& call, int world_size);

}  // namespace dtrain::comm
