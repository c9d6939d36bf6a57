// The nccl backend in builds without CUDA.
#include "comm/backends/nccl_backend.h"
#include "runtime/base/error.h"

namespace dtrain::comm {

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm, SixteenBitSum) {
  DTRAIN_USAGE_FAIL() << "the nccl backend needs a CUDA build of dtrain (DTRAIN_CUDA=ON)";
}

}  // namespace dtrain::comm
