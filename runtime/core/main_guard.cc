#include "runtime/core/main_guard.h"

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "runtime/core/collective_usage_check.h"
#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/core/mpi_scope.h"
#include "runtime/core/process_identity.h"

namespace dtrain::core {
namespace {

[[noreturn]] void end_job(int status, bool silent) {
  if (mpi_is_active()) {
    // The launcher forwards our stderr asynchronously and stops once the job is aborted, so give
    // the error line a second to get out first. A rank that printed nothing waits longer, so its
    // abort cannot tear the job down before the rank that printed gets its line out.
    std::this_thread::sleep_for(std::chrono::seconds(silent ? 3 : 1));
    MPI_Abort(MPI_COMM_WORLD, status);
  }
  std::_Exit(status);
}

// Whether this rank prints the error. Once MPI runs, ranks read their own files and environment,
// and the rank that found a problem may be the only one that knows: it prints. A usage error found
// before MPI started comes from the flags and the config file: the flags are alike everywhere,
// the file may be missing on one node only, so the first rank of each node prints it (one line
// per node, not one per rank).
bool prints(bool usage_error) {
  return !usage_error || mpi_is_active() || is_world_rank_zero() || process_identity().local_rank <= 0;
}

void report(const std::string& message, bool usage_error) {
  if (prints(usage_error)) write_log_line(LogLevel::kError, message);
}

[[noreturn]] void on_terminate() {
  std::string message = "std::terminate called";
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& e) {
      message = std::string("uncaught exception in a thread: ") + e.what();
    } catch (...) {
      message = "uncaught non-standard exception in a thread";
    }
  }
  report(message, false);
  end_job(kExitFailure, !prints(false));
}

}  // namespace

int run_main(int argc, char** argv, const std::function<int(int, char**)>& body) {
  std::set_terminate(on_terminate);
  int status = kExitFailure;
  bool usage_error = false;
  try {
    log_level();  // validates DTRAIN_LOG_LEVEL before anything else is logged
    return body(argc, argv);
  } catch (const UsageReportedElsewhere&) {
    // Another rank prints it (collective_usage_check.h); this one only ends.
    end_job(kExitUsage, true);
  } catch (const UsageError& e) {
    usage_error = true;
    status = kExitUsage;
    report(e.what(), true);
  } catch (const std::exception& e) {
    report(e.what(), false);
  } catch (...) {
    report("unknown exception", false);
  }
  end_job(status, !prints(usage_error));
}

}  // namespace dtrain::core
