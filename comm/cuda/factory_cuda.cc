// The nccl backend in CUDA builds.
#include "comm/backends/cuda/nccl_communicator.h"
#include "comm/factory.h"

namespace dtrain::comm {

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm) {
  return std::make_unique<NcclCommunicator>(comm);
}

}  // namespace dtrain::comm
