#include "runtime/base/process_identity.h"

#include <unistd.h>

#include <cstdlib>

namespace dtrain::runtime {
namespace {

int env_rank(const char* const* names) {
  for (const char* const* name = names; *name != nullptr; ++name) {
    if (const char* value = std::getenv(*name)) {
      char* end = nullptr;
      const long parsed = std::strtol(value, &end, 10);
      if (end != value && *end == '\0' && parsed >= 0) return static_cast<int>(parsed);
    }
  }
  return -1;
}

ProcessIdentity identity_from_launcher() {
  ProcessIdentity id;
  char host[256] = {};
  id.host = gethostname(host, sizeof(host) - 1) == 0 ? host : "unknown-host";
  static const char* const kRank[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", nullptr};
  static const char* const kSize[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", nullptr};
  static const char* const kLocal[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", nullptr};
  id.world_rank = env_rank(kRank);
  id.world_size = env_rank(kSize);
  id.local_rank = env_rank(kLocal);
  return id;
}

ProcessIdentity& mutable_identity() {
  static ProcessIdentity identity = identity_from_launcher();
  return identity;
}

}  // namespace

const ProcessIdentity& process_identity() {
  return mutable_identity();
}

void set_process_identity(int world_rank, int world_size, int local_rank) {
  ProcessIdentity& id = mutable_identity();
  id.world_rank = world_rank;
  id.world_size = world_size;
  id.local_rank = local_rank;
}

bool is_world_rank_zero() {
  return process_identity().world_rank <= 0;
}

}  // namespace dtrain::runtime
