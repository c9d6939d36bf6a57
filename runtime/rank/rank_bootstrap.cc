#include "runtime/rank/rank_bootstrap.h"

#include <mpi.h>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/base/top_level_handler.h"
#include "runtime/mpi/collective_usage_check.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::runtime {
namespace {

// The agreement of BootstrapOptions::start_error / start_exit: two reductions and one usage check,
// the same calls on every rank whatever it found. True when every rank asked for an early exit.
bool agree_on_start(const BootstrapOptions& options) {
  const int mine = options.start_exit ? 1 : 0;
  int every = 0;
  DTRAIN_MPI_CHECK(MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  std::string error = options.start_error;
  if (error.empty() && options.start_exit && every == 0) {
    error =
        "--help or --version was given to this rank but not to every rank (an MPMD launch or a per-rank "
        "wrapper?): give it to all ranks or to none";
  }
  collective_usage_check(MPI_COMM_WORLD, [&] { DTRAIN_USAGE_CHECK(error.empty()) << error; });
  return every == 1;
}

}  // namespace

bool read_before_mpi(const std::function<bool()>& read, BootstrapOptions* options) {
  // Beside other ranks (the launcher's environment says so), a rank that ended here could leave
  // them waiting in MPI_Init: it keeps what it found for the agreement instead.
  const bool alone = process_identity().world_size <= 1;
  try {
    options->start_exit = !read();
  } catch (const UsageError& e) {
    if (alone) throw;
    options->start_error = e.detail();
  } catch (const ExitRequested&) {  // --version
    if (alone) throw;
    options->start_exit = true;
  }
  return !(alone && options->start_exit);
}

RankBootstrap::RankBootstrap(int* argc, char*** argv, const BootstrapOptions& options)
    : mpi_(argc, argv), exit_agreed_(agree_on_start(options)), ctx_(RankContext::from_environment()) {
  if (exit_agreed_) return;
  if (options.claim_cpu_share) {
    const CpuShare cpus = claim_cpu_share(ctx_.topology().host_local_rank, ctx_.topology().host_local_size);
    if (cpus.widened) {
      DTRAIN_LOG(kInfo) << cpus.describe();
    }
  }
  if (options.bind_gpu) gpu_ = bind_gpu(ctx_, options.allow_gpu_sharing);
}

}  // namespace dtrain::runtime
