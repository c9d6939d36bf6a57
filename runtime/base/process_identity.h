#pragma once
// Who this process is in the job: host, world rank/size and local rank. Errors and log lines
// carry it. Before MPI is initialized it is read from the launcher's environment (Open MPI,
// PMIx, Slurm), so even a bad flag is reported with its rank; RankContext sets the final values.
// Set from the main thread before worker threads start; read from any thread afterwards.
#include <string>

namespace dtrain::runtime {

struct ProcessIdentity {
  std::string host;
  int world_rank = -1;  // -1: not known yet
  int world_size = -1;
  int local_rank = -1;
};

const ProcessIdentity& process_identity();

// Called by RankContext once MPI has told us the truth.
void set_process_identity(int world_rank, int world_size, int local_rank);

// True when this process is (or will be) world rank 0, or its rank is unknown (a singleton run).
bool is_world_rank_zero();

}  // namespace dtrain::runtime
