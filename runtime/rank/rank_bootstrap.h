#pragma once
// What every dtrain executable does first, once its flags are read: MPI up (MPI_THREAD_MULTIPLE),
// the rank's place in the job, its share of the host's CPUs (claimed before any thread starts, so
// threads inherit it), and its GPU. One object in main, alive until the program's work is done.
#include <functional>
#include <string>

#include "runtime/mpi/mpi_scope.h"
#include "runtime/rank/cpu_affinity.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_context.h"

namespace dtrain::runtime {

struct BootstrapOptions {
  bool bind_gpu = true;            // false: CPU mode, no GPU bound or counted (--device cpu)
  bool allow_gpu_sharing = false;  // more local ranks than GPUs is fine (tests, debugging)
  bool claim_cpu_share = false;    // pin the rank to its share of the host's CPUs (logged if widened)
  // What this rank found before MPI started, in a launch of several ranks: a usage error's text (a
  // bad flag on this rank only, from an MPMD launch or a per-rank wrapper), or an early exit
  // (--help, --version). The ranks agree on them first thing after MPI_Init: the rank that found an
  // error prints it, naming its rank and host, and every rank ends with status 2; --help on every
  // rank ends every rank with status 0 (exit_agreed()); on some ranks only, it is an error. No rank
  // is left waiting in MPI_Init or in a collective for one that left early.
  std::string start_error;
  bool start_exit = false;
};

// Runs `read` (a tool's command line and config, before MPI; false: --help was answered) and
// records what it found in `options` for the agreement above. Returns false when the process is
// alone and should end now with status 0; alone, a usage error is rethrown for the handler to print.
bool read_before_mpi(const std::function<bool()>& read, BootstrapOptions* options);

class RankBootstrap {
 public:
  // Collective over MPI_COMM_WORLD (the GPU placement check).
  RankBootstrap(int* argc, char*** argv, const BootstrapOptions& options);
  RankBootstrap(const RankBootstrap&) = delete;
  RankBootstrap& operator=(const RankBootstrap&) = delete;

  const RankContext& ctx() const { return ctx_; }
  const GpuBinding& gpu() const { return gpu_; }
  // Every rank asked for an early exit (start_exit): return from main with status 0 (MPI finalizes).
  bool exit_agreed() const { return exit_agreed_; }
  // The bound GPU's index, or -1 in CPU mode or on a simulated GPU.
  int real_gpu_index() const { return !gpu_.cpu_mode && !gpu_.device.simulated ? gpu_.device.index : -1; }

 private:
  MpiScope mpi_;
  bool exit_agreed_;  // before ctx_: the agreement comes first, before any other collective
  RankContext ctx_;
  GpuBinding gpu_;
};

}  // namespace dtrain::runtime
