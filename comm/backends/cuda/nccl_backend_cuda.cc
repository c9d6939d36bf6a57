// The nccl backend in CUDA builds.
#include "comm/backends/cuda/nccl_communicator.h"
#include "comm/backends/nccl_backend.h"

namespace dtrain::comm {

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, SixteenBitSum sum16) {
  return std::make_unique<NcclCommunicator>(comm, sum16);
}

}  // namespace dtrain::comm
