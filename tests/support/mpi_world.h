#pragma once
// This process's rank and the world size, for multi-rank tests.
#include <mpi.h>

namespace dtrain::test {

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace dtrain::test
