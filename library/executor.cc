#include "library/executor.h"

#include <climits>
#include <cstring>

#include "include/dtrain/dtrain.h"
#include "library/element_types.h"
#include "runtime/base/error.h"
#include "runtime/memory/dtype.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::library {
namespace {

using runtime::bfloat16;
using runtime::float16;

int mpi_count(int64_t count, const char* what) {
  DTRAIN_USAGE_CHECK(count <= INT_MAX) << what << " of " << count
                                       << " exceeds what one MPI call moves (INT_MAX elements or bytes)";
  return static_cast<int>(count);
}

// Multiplies `count` elements of a floating-point dtype by `factor` (rounding 16-bit results once).
void scale(void* buffer, int64_t count, int dtype, double factor) {
  if (factor == 1.0) return;
  const auto n = static_cast<size_t>(count);
  switch (dtype) {
    case DTRAIN_FLOAT32:
      for (size_t i = 0; i < n; ++i) static_cast<float*>(buffer)[i] *= static_cast<float>(factor);
      break;
    case DTRAIN_FLOAT64:
      for (size_t i = 0; i < n; ++i) static_cast<double*>(buffer)[i] *= factor;
      break;
    case DTRAIN_FLOAT16: {
      auto* v = static_cast<float16*>(buffer);
      for (size_t i = 0; i < n; ++i) v[i] = runtime::to_float16(runtime::to_float(v[i]) * static_cast<float>(factor));
      break;
    }
    case DTRAIN_BFLOAT16: {
      auto* v = static_cast<bfloat16*>(buffer);
      for (size_t i = 0; i < n; ++i) v[i] = runtime::to_bfloat16(runtime::to_float(v[i]) * static_cast<float>(factor));
      break;
    }
    default: DTRAIN_CHECK(false) << "scale factor " << factor << " on " << dtype_label(dtype);
  }
}

// fp16 / bf16 <-> fp32, exact in this direction, so min and max in fp32 are exact too.
std::vector<float> widen(const void* data, int64_t count, int dtype) {
  std::vector<float> out(static_cast<size_t>(count));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = dtype == DTRAIN_FLOAT16 ? runtime::to_float(static_cast<const float16*>(data)[i])
                                     : runtime::to_float(static_cast<const bfloat16*>(data)[i]);
  return out;
}
void narrow(const std::vector<float>& in, void* data, int dtype) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (dtype == DTRAIN_FLOAT16) {
      static_cast<float16*>(data)[i] = runtime::to_float16(in[i]);
    } else {
      static_cast<bfloat16*>(data)[i] = runtime::to_bfloat16(in[i]);
    }
  }
}

comm::ReduceOp communicator_op(int op) {
  return op == DTRAIN_AVERAGE ? comm::ReduceOp::kAverage : comm::ReduceOp::kSum;
}

}  // namespace

Executor::Executor(MPI_Comm data_comm, comm::Communicator& communicator)
    : data_comm_(data_comm), communicator_(communicator) {
  DTRAIN_MPI_CHECK(MPI_Comm_rank(data_comm_, &rank_));
  DTRAIN_MPI_CHECK(MPI_Comm_size(data_comm_, &size_));
}

void Executor::run(const Response& response, const std::vector<Operation*>& ops) {
  switch (ops.front()->request.kind) {
    case OpKind::kAllReduce: all_reduce(ops); break;
    case OpKind::kBroadcast: broadcast(*ops.front()); break;
    case OpKind::kAllGather: all_gather(*ops.front(), response.counts); break;
    case OpKind::kReduceScatter: reduce_scatter(*ops.front()); break;
    case OpKind::kAllToAll: all_to_all(*ops.front()); break;
    case OpKind::kBarrier: break;  // every rank has submitted it: that was the barrier
    case OpKind::kJoin: break;     // completed by the engine (engine_join.cc), never scheduled here
  }
}

void Executor::all_reduce(const std::vector<Operation*>& ops) {
  const Request& head = ops.front()->request;
  const size_t esize = element_size(head.dtype);
  void* buffer = ops.front()->recv;
  int64_t total = head.count;
  if (ops.size() == 1) {
    const void* send = ops.front()->send;
    // Out of place straight through the communicator, which reads `send` as it goes: copying it
    // into `recv` first costs as much as a large reduction's own traffic on a host.
    if (send != buffer && head.count > 0 && head.prescale == 1.0 && communicator_reduces(head.dtype, head.op)) {
      communicator_
          .all_reduce(send, buffer, static_cast<size_t>(total), *communicator_dtype(head.dtype),
                      communicator_op(head.op))
          .wait();
      scale(buffer, total, head.dtype, head.postscale);
      return;
    }
    if (head.count > 0 && send != buffer) std::memcpy(buffer, send, head.count * esize);
  } else {
    total = 0;
    for (const Operation* op : ops) total += op->request.count;
    fusion_.resize((static_cast<size_t>(total) * esize + sizeof(double) - 1) / sizeof(double));
    buffer = fusion_.data();
    size_t at = 0;
    for (const Operation* op : ops) {
      // An empty operation may pass NULL, which memcpy may not see even for 0 bytes.
      if (op->request.count > 0) std::memcpy(static_cast<char*>(buffer) + at, op->send, op->request.count * esize);
      at += op->request.count * esize;
    }
  }
  scale(buffer, total, head.dtype, head.prescale);
  reduce_in_place(buffer, total, head.dtype, head.op);
  scale(buffer, total, head.dtype, head.postscale);
  if (ops.size() > 1) {
    size_t at = 0;
    for (Operation* op : ops) {
      if (op->request.count > 0)
        std::memcpy(op->recv, static_cast<const char*>(buffer) + at, op->request.count * esize);
      at += op->request.count * esize;
    }
  }
}

void Executor::reduce_in_place(void* buffer, int64_t count, int dtype, int op) {
  if (communicator_reduces(dtype, op)) {
    communicator_
        .all_reduce(buffer, buffer, static_cast<size_t>(count), *communicator_dtype(dtype), communicator_op(op))
        .wait();
    return;
  }
  const int n = mpi_count(count, "allreduce count");
  if (dtype == DTRAIN_FLOAT16 || dtype == DTRAIN_BFLOAT16) {  // min or max
    std::vector<float> wide = widen(buffer, count, dtype);
    DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, wide.data(), n, MPI_FLOAT, mpi_op(op), data_comm_));
    narrow(wide, buffer, dtype);
    return;
  }
  DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buffer, n, mpi_type(dtype), mpi_op(op), data_comm_));
  if (op == DTRAIN_AVERAGE) scale(buffer, count, dtype, 1.0 / size_);  // fp64: floats only reach here
}

void Executor::broadcast(Operation& op) {
  const Request& r = op.request;
  if (auto dtype = communicator_dtype(r.dtype)) {
    communicator_.broadcast(op.recv, static_cast<size_t>(r.count), *dtype, r.root).wait();
    return;
  }
  const int bytes = mpi_count(r.count * static_cast<int64_t>(element_size(r.dtype)), "broadcast bytes");
  DTRAIN_MPI_CHECK(MPI_Bcast(op.recv, bytes, MPI_BYTE, r.root, data_comm_));
}

void Executor::all_gather(Operation& op, const std::vector<int64_t>& counts) {
  const Request& r = op.request;
  DTRAIN_CHECK(counts.size() == static_cast<size_t>(size_)) << "all-gather response without every rank's count";
  if (op.recv_counts != nullptr) std::copy(counts.begin(), counts.end(), op.recv_counts);
  bool equal = true;
  for (int64_t c : counts) equal = equal && c == counts.front();
  const auto dtype = communicator_dtype(r.dtype);
  if (equal && dtype) {
    communicator_.all_gather(op.send, op.recv, static_cast<size_t>(r.count), *dtype).wait();
    return;
  }
  const int64_t esize = static_cast<int64_t>(element_size(r.dtype));
  std::vector<int> bytes(counts.size());
  std::vector<int> displacements(counts.size());
  int64_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    bytes[i] = mpi_count(counts[i] * esize, "allgather bytes");
    displacements[i] = mpi_count(at, "allgather offset");
    at += counts[i] * esize;
  }
  const void* send = op.send == static_cast<char*>(op.recv) + displacements[rank_] ? MPI_IN_PLACE : op.send;
  DTRAIN_MPI_CHECK(
      MPI_Allgatherv(send, bytes[rank_], MPI_BYTE, op.recv, bytes.data(), displacements.data(), MPI_BYTE, data_comm_));
}

void Executor::reduce_scatter(Operation& op) {
  const Request& r = op.request;
  if (communicator_reduces(r.dtype, r.op)) {
    communicator_
        .reduce_scatter(op.send, op.recv, static_cast<size_t>(r.count), *communicator_dtype(r.dtype),
                        communicator_op(r.op))
        .wait();
    return;
  }
  // MPI_Reduce_scatter_block may not write into its input, which in place it would.
  const int n = mpi_count(r.count, "reducescatter count");
  mpi_count(r.count * size_, "reducescatter input");
  if (r.dtype == DTRAIN_FLOAT16 || r.dtype == DTRAIN_BFLOAT16) {
    std::vector<float> wide = widen(op.send, r.count * size_, r.dtype);
    std::vector<float> out(static_cast<size_t>(r.count));
    DTRAIN_MPI_CHECK(MPI_Reduce_scatter_block(wide.data(), out.data(), n, MPI_FLOAT, mpi_op(r.op), data_comm_));
    narrow(out, op.recv, r.dtype);
    return;
  }
  const size_t bytes = static_cast<size_t>(r.count) * element_size(r.dtype);
  std::vector<double> out((bytes + sizeof(double) - 1) / sizeof(double));
  DTRAIN_MPI_CHECK(MPI_Reduce_scatter_block(op.send, out.data(), n, mpi_type(r.dtype), mpi_op(r.op), data_comm_));
  if (bytes > 0) std::memcpy(op.recv, out.data(), bytes);
  if (r.op == DTRAIN_AVERAGE) scale(op.recv, r.count, r.dtype, 1.0 / size_);
}

void Executor::all_to_all(Operation& op) {
  const Request& r = op.request;
  const int bytes = mpi_count(r.count * static_cast<int64_t>(element_size(r.dtype)), "alltoall block bytes");
  mpi_count(static_cast<int64_t>(bytes) * size_, "alltoall bytes");
  DTRAIN_MPI_CHECK(MPI_Alltoall(op.send, bytes, MPI_BYTE, op.recv, bytes, MPI_BYTE, data_comm_));
}

}  // namespace dtrain::library
