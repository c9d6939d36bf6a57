#pragma once
// Verifies, before any bytes move, that every rank entered the same collective: same kind, count,
// dtype, op, root and memory location. A mismatch would otherwise hang (different message sizes)
// or silently corrupt (different dtypes); here it becomes an Error on every rank naming the ranks
// and what each passed.
//
// Cost: one 16-byte MPI_Allreduce per call; a second exchange only when something differs. It runs
// on every call rather than on a buffer's first use only: a per-rank "first use" cache can make
// ranks disagree on whether to check, which would itself hang. Benchmarks switch it off.
#include <mpi.h>

#include "comm/collective.h"

namespace dtrain::comm {

// Collective over `comm`.
void check_same_collective(MPI_Comm comm, const Collective& call);

}  // namespace dtrain::comm
