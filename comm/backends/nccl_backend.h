#pragma once
// The nccl backend made from any MPI communicator (the hierarchical backend's node communicator as
// well as the world): nccl_backend_cuda.cc in CUDA builds, nccl_backend_cpu.cc without.
#include <mpi.h>

#include <memory>

#include "comm/backend_kind.h"
#include "comm/communicator.h"

namespace dtrain::comm {

// The nccl backend over any MPI communicator; a UsageError in builds without CUDA.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, SixteenBitSum sum16 = SixteenBitSum::kFp32);

}  // namespace dtrain::comm
