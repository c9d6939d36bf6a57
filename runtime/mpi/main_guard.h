#pragma once
// The top-level error policy of every dtrain executable:
//   int main(int argc, char** argv) { return dtrain::runtime::run_main(argc, argv, real_main); }
// An exception escaping `body` (or any thread, via std::terminate) is logged once and ends the
// whole job: with MPI active, MPI_Abort, so no rank is left waiting in a collective.
// A UsageError exits with status 2, any other error with status 1. Every error is printed by the
// rank that hit it, with its host and rank, so a problem on one node only (its data directory
// missing, say) is never silent. The one exception: a UsageError thrown before MPI is initialized
// comes from the command line and the config file, which the ranks of a node read alike, so only
// rank 0 and the first rank of each node print it.
//
// The policy itself is in top_level_handler.h (dtrain_base, no MPI); run_main adds the MPI abort.
// A program that never starts MPI and must not link it (dtrain-run) calls run_main_without_mpi.
#include <functional>

#include "runtime/base/top_level_handler.h"

namespace dtrain::runtime {

int run_main(int argc, char** argv, const std::function<int(int, char**)>& body);

}  // namespace dtrain::runtime
