#include "runtime/base/top_level_handler.h"

#include <cstdlib>
#include <exception>
#include <string>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"

namespace dtrain::runtime {
namespace {

// Set once by run_main_with, before any thread of ours starts; read by on_terminate.
JobEnd g_job_end;

bool job_running() {
  return g_job_end.job_running != nullptr && g_job_end.job_running();
}

[[noreturn]] void end_job(int status, bool silent) {
  if (job_running()) g_job_end.abort_job(status, silent);
  std::_Exit(status);
}

// Whether this rank prints the error. Once MPI runs, ranks read their own files and environment,
// and the rank that found a problem may be the only one that knows: it prints. A usage error found
// before MPI started comes from the flags and the config file: the flags are alike everywhere,
// the file may be missing on one node only, so the first rank of each node prints it (one line
// per node, not one per rank).
bool prints(bool usage_error) {
  return !usage_error || job_running() || is_world_rank_zero() || process_identity().local_rank <= 0;
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

int run_main_with(int argc, char** argv, const std::function<int(int, char**)>& body, JobEnd job_end) {
  g_job_end = job_end;
  std::set_terminate(on_terminate);
  int status = kExitFailure;
  bool usage_error = false;
  try {
    log_level();  // validates DTRAIN_LOG_LEVEL before anything else is logged
    return body(argc, argv);
  } catch (const ExitRequested& e) {
    return e.status;
  } catch (const UsageReportedElsewhere&) {
    // Another rank prints it (collective_usage_check.h); this one only ends.
    end_job(kExitUsage, true);
  } catch (const UsageError& e) {
    usage_error = true;
    status = kExitUsage;
    report(e.what(), true);
    if (prints(true) && log_enabled(LogLevel::kDebug)) {
      write_log_line(LogLevel::kDebug,
                     std::string("the usage error above was raised at ") + e.file() + ":" + std::to_string(e.line()));
    }
  } catch (const std::exception& e) {
    report(e.what(), false);
  } catch (...) {
    report("unknown exception", false);
  }
  end_job(status, !prints(usage_error));
}

int run_main_without_mpi(int argc, char** argv, const std::function<int(int, char**)>& body) {
  return run_main_with(argc, argv, body, JobEnd{});
}

}  // namespace dtrain::runtime
