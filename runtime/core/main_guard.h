#pragma once
// The top-level error policy of every dtrain executable:
//   int main(int argc, char** argv) { return dtrain::core::run_main(argc, argv, real_main); }
// An exception escaping `body` (or any thread, via std::terminate) is logged once and ends the
// whole job: with MPI active, MPI_Abort, so no rank is left waiting in a collective.
// A UsageError exits with status 2, any other error with status 1. Every error is printed by the
// rank that hit it, with its host and rank, so a problem on one node only (its data directory
// missing, say) is never silent. The one exception: a UsageError thrown before MPI is initialized
// comes from the command line and the config file, which the ranks of a node read alike, so only
// rank 0 and the first rank of each node print it.
#include <functional>

namespace dtrain::core {

int run_main(int argc, char** argv, const std::function<int(int, char**)>& body);

inline constexpr int kExitUsage = 2;
inline constexpr int kExitFailure = 1;
// A run stopped by a stop signal (preemption, time limit; stop_signals.h) after writing its
// checkpoint: EX_TEMPFAIL, "try again". The sbatch script requeues the job on it.
inline constexpr int kExitPreempted = 75;

}  // namespace dtrain::core
