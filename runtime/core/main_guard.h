#pragma once
// The top-level error policy of every dtrain executable:
//   int main(int argc, char** argv) { return dtrain::core::run_main(argc, argv, real_main); }
// An exception escaping `body` (or any thread, via std::terminate) is logged once and ends the
// whole job: with MPI active, MPI_Abort, so no rank is left waiting in a collective.
// A UsageError is the same on every rank, so only rank 0 prints it; exit status 2.
// Any other error is printed by the rank that hit it; exit status 1.
#include <functional>

namespace dtrain::core {

int run_main(int argc, char** argv, const std::function<int(int, char**)>& body);

inline constexpr int kExitUsage = 2;
inline constexpr int kExitFailure = 1;

}  // namespace dtrain::core
