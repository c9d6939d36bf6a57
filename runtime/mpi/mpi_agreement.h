#pragma once
// Whether every rank of a communicator holds the same 64-bit value, in one 16-byte all-reduce:
// max(v) and max(~v) = ~min(v) are equal exactly when min == max.
#include <mpi.h>

#include <cstdint>

namespace dtrain::runtime {

// Collective over `comm`; the same answer on every rank.
bool same_on_every_rank(MPI_Comm comm, uint64_t value);

}  // namespace dtrain::runtime
