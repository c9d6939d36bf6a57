#include "runtime/mpi/main_guard.h"

#include <mpi.h>

#include <chrono>
#include <thread>

#include "runtime/mpi/mpi_scope.h"

namespace dtrain::runtime {
namespace {

// The MPI half of the policy (top_level_handler.h calls it only while mpi_is_active()).
void abort_mpi_job(int status, bool silent) {
  // The launcher forwards our stderr asynchronously and stops once the job is aborted, so give
  // the error line a second to get out first. A rank that printed nothing waits longer, so its
  // abort cannot tear the job down before the rank that printed gets its line out.
  std::this_thread::sleep_for(std::chrono::seconds(silent ? 3 : 1));
  MPI_Abort(MPI_COMM_WORLD, status);
}

}  // namespace

int run_main(int argc, char** argv, const std::function<int(int, char**)>& body) {
  return run_main_with(argc, argv, body, JobEnd{mpi_is_active, abort_mpi_job});
}

}  // namespace dtrain::runtime
