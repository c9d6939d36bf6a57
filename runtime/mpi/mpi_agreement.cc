#include "runtime/mpi/mpi_agreement.h"

#include "runtime/mpi/mpi_check.h"

namespace dtrain::runtime {

bool same_on_every_rank(MPI_Comm comm, uint64_t value) {
  uint64_t local[2] = {value, ~value};
  uint64_t global[2] = {0, 0};
  DTRAIN_MPI_CHECK(MPI_Allreduce(local, global, 2, MPI_UINT64_T, MPI_MAX, comm));
  return global[0] == ~global[1];
}

}  // namespace dtrain::runtime
