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

#include <cstdint>
#include <functional>
#include <string>

#include "comm/collective.h"

namespace dtrain::comm {

// Collective over `comm`.
void check_same_collective(MPI_Comm comm, const Collective& call);

// Collective over `comm`: a UsageError on every rank unless every rank passes the same `value` of
// the setting `name` (an environment variable such as DTRAIN_RING_SEGMENT_BYTES), naming the
// variable and the values of the ranks that differ. Settings that shape the messages (segment and
// piece sizes) must agree, or the ranks' messages no longer match. `describe` names a value in
// the message (default: the number).
void check_same_setting(MPI_Comm comm, const char* name, uint64_t value,
                        const std::function<std::string(uint64_t)>& describe = nullptr);

}  // namespace dtrain::comm
