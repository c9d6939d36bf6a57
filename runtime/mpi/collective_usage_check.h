#pragma once
// Usage errors found by some ranks, reported once. A rank reading its own files (a data directory
// missing on one node) may be the only one to find a problem; a shared mistake is found by every
// rank at once. Code that every rank runs with no collective inside (scanning the data, reading the
// environment) runs under `collective_usage_check`, and then one all-gather tells every rank what
// went wrong where:
//   - the lowest rank holding each distinct message throws it as a UsageError naming the ranks
//     (and hosts) that found it, which the top-level handler prints;
//   - every other rank throws UsageReportedElsewhere, which the handler does not print;
// so the job prints one line per distinct problem and ends with status 2. Nobody is left waiting:
// all ranks throw after the same collective.
//
// Errors other than UsageError pass through untouched (they end the job through MPI_Abort).
#include <mpi.h>

#include <functional>

#include "runtime/base/error.h"

namespace dtrain::runtime {

// UsageReportedElsewhere, the error the silent ranks throw, is declared in error.h.

// Collective over `comm`. `body` must not call collectives on `comm`.
void collective_usage_check(MPI_Comm comm, const std::function<void()>& body);

// Collective over `comm`: every rank passes whether it holds `error` (its detail text); the lowest
// such rank throws it, naming the ranks and hosts that hold the same text, the others throw
// UsageReportedElsewhere. Returns when no rank holds one. For checks whose error every rank finds
// by the same all-gather (datasets that differ between ranks), pass it on the rank that should
// speak, with name_ranks false when the text already says who.
void throw_usage_error_once(MPI_Comm comm, const std::string* error, const char* file, int line,
                            bool name_ranks = true);

}  // namespace dtrain::runtime
