#include "runtime/core/main_guard.h"

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/core/mpi_scope.h"
#include "runtime/core/process_identity.h"

namespace dtrain::core {
namespace {

[[noreturn]] void end_job(int status, bool usage_error) {
  if (mpi_is_active()) {
    // The launcher forwards our stderr asynchronously and stops once the job is aborted, so give
    // the error line a second to get out first. Rank 0 carries the message of a usage error:
    // the other ranks wait longer, so their aborts cannot tear the job down before it is printed.
    const bool silent_rank = usage_error && !is_world_rank_zero();
    std::this_thread::sleep_for(std::chrono::seconds(silent_rank ? 3 : 1));
    MPI_Abort(MPI_COMM_WORLD, status);
  }
  std::_Exit(status);
}

void report(const std::string& message, bool usage_error) {
  if (usage_error && !is_world_rank_zero()) return;
  write_log_line(LogLevel::kError, message);
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
  end_job(kExitFailure, false);
}

}  // namespace

int run_main(int argc, char** argv, const std::function<int(int, char**)>& body) {
  std::set_terminate(on_terminate);
  int status = kExitFailure;
  bool usage_error = false;
  try {
    log_level();  // validates DTRAIN_LOG_LEVEL before anything else is logged
    return body(argc, argv);
  } catch (const UsageError& e) {
    usage_error = true;
    status = kExitUsage;
    report(e.what(), true);
  } catch (const std::exception& e) {
    report(e.what(), false);
  } catch (...) {
    report("unknown exception", false);
  }
  end_job(status, usage_error);
}

}  // namespace dtrain::core
