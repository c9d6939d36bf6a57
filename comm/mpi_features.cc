#include "comm/mpi_features.h"

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

namespace dtrain::comm {

bool mpi_reports_cuda_support() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;  // built against an MPI that has no CUDA support compiled in, or cannot say
#endif
}

}  // namespace dtrain::comm
