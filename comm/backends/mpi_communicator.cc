#include "comm/backends/mpi_communicator.h"

#include <algorithm>
#include <cstring>

#include "comm/host/host_reduce.h"
#include "comm/host/wide_reduction.h"
#include "runtime/base/error.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::comm {
namespace {

// MPI counts are int; larger buffers go in pieces of this many elements.
constexpr size_t kPiece = size_t{1} << 30;

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : HostCommunicator(comm) {}

void MpiCommunicator::run(const Collective& call) {
  const size_t esize = runtime::dtype_size(call.dtype);
  switch (call.kind) {
    case CollectiveKind::kAllReduce: all_reduce(call); return;
    case CollectiveKind::kReduceScatter: reduce_scatter(call); return;
    case CollectiveKind::kBroadcast: {
      auto* bytes = static_cast<unsigned char*>(call.recv);
      for (size_t at = 0; at < call.count * esize; at += kPiece) {
        const int n = static_cast<int>(std::min(kPiece, call.count * esize - at));
        DTRAIN_MPI_CHECK(MPI_Bcast(bytes + at, n, MPI_BYTE, call.root, mpi_comm()));
      }
      return;
    }
    case CollectiveKind::kAllGather: {
      const size_t block = call.count * esize;
      DTRAIN_CHECK(block <= kPiece) << describe(call) << ": the mpi backend gathers blocks of at most 1 GiB";
      auto* recv = static_cast<unsigned char*>(call.recv);
      const bool in_place = call.send == recv + static_cast<size_t>(rank()) * block;
      DTRAIN_MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : call.send, static_cast<int>(block), MPI_BYTE, recv,
                                     static_cast<int>(block), MPI_BYTE, mpi_comm()));
      return;
    }
    case CollectiveKind::kBarrier: DTRAIN_MPI_CHECK(MPI_Barrier(mpi_comm())); return;
  }
}

void MpiCommunicator::all_reduce(const Collective& call) {
  const float scale = call.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(size()) : 1.0f;
  auto sum_in_place = [&](float* work) {
    for (size_t at = 0; at < call.count; at += kPiece) {
      const int n = static_cast<int>(std::min(kPiece, call.count - at));
      DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, work + at, n, MPI_FLOAT, MPI_SUM, mpi_comm()));
    }
  };
  if (call.dtype == DType::kF32) {
    auto* work = static_cast<float*>(call.recv);
    if (call.send != call.recv && call.count > 0) std::memcpy(work, call.send, call.count * sizeof(float));
    sum_in_place(work);
    scale_copy(work, work, call.count, scale);
    return;
  }
  // Host conversions even for device pointers given directly (DTRAIN_MPI_DEVICE_POINTERS): MPI
  // reads them here, so they are host-addressable (managed memory).
  scratch_.resize(call.count);
  reduce_widened({call.send, call.dtype, call.count, call.count, scale, Location::host(), scratch_.data()},
                 [&](float* wide) {
                   sum_in_place(wide);
                   return Rounding{wide, call.recv, call.count};
                 });
}

void MpiCommunicator::reduce_scatter(const Collective& call) {
  const float scale = call.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(size()) : 1.0f;
  DTRAIN_CHECK(call.count <= kPiece) << describe(call) << ": the mpi backend scatters blocks of at most 2^30";
  const size_t total = call.count * static_cast<size_t>(size());
  scratch_.resize(total);
  scratch_out_.resize(call.count);
  reduce_widened({call.send, call.dtype, total, total, scale, Location::host(), scratch_.data()}, [&](float* wide) {
    DTRAIN_MPI_CHECK(MPI_Reduce_scatter_block(wide, scratch_out_.data(), static_cast<int>(call.count), MPI_FLOAT,
                                              MPI_SUM, mpi_comm()));
    return Rounding{scratch_out_.data(), call.recv, call.count};
  });
}

}  // namespace dtrain::comm
