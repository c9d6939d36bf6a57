#pragma once
// Variable-length byte strings gathered to one root (serialized protobuf messages, mostly).
#include <mpi.h>

#include <string>
#include <vector>

namespace dtrain::runtime {

// Collective over `comm`: the root receives every rank's `bytes` in rank order; others get {}.
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& bytes, int root = 0);

}  // namespace dtrain::runtime
