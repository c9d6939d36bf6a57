#pragma once
// The top-level error policy of main_guard.h, less MPI. It lives in dtrain_base, the part of
// runtime that links no MPI, CUDA or protobuf, because dtrain-run (which only builds an
// mpirun / srun command and execs it) must start on a login node with no MPI or GPU library.
// How a *job* ends is the one MPI-specific step; the caller passes it in as a JobEnd:
//   - run_main (main_guard.h, dtrain_core) passes MPI's: while MPI is active, MPI_Abort;
//   - run_main_without_mpi passes none: the process exits with the status.
// Everything else (what is printed, by which rank, the exit status) is the same code for both.
#include <functional>

namespace dtrain::runtime {

inline constexpr int kExitUsage = 2;
inline constexpr int kExitFailure = 1;
// A run stopped by a stop signal (preemption, time limit; stop_signals.h) after writing its
// checkpoint: EX_TEMPFAIL, "try again". The sbatch script requeues the job on it.
inline constexpr int kExitPreempted = 75;

// Thrown to end the program early with `status` and no error (--version, say): the top-level
// handler returns it from main, unwinding (and so finalizing MPI) on the way.
struct ExitRequested {
  int status = 0;
};

// How to end the whole job once the error is printed. Both null: there is no job beyond this
// process.
struct JobEnd {
  // True while a job-wide abort is possible (MPI between init and finalize). While it holds, every
  // rank prints its own errors, usage errors included.
  bool (*job_running)() = nullptr;
  // Ends every process of the job with `status`; `silent`: this process printed nothing. Called only
  // while job_running() holds; if it returns, the process exits with `status`.
  void (*abort_job)(int status, bool silent) = nullptr;
};

// Runs body(argc, argv) under the policy of main_guard.h, ending the job through `job_end`.
// Installs a std::terminate handler that does the same; call once, from main.
int run_main_with(int argc, char** argv, const std::function<int(int, char**)>& body, JobEnd job_end);

// For a program that is not an MPI rank (dtrain-run): the same policy, and the process exits.
int run_main_without_mpi(int argc, char** argv, const std::function<int(int, char**)>& body);

}  // namespace dtrain::runtime
