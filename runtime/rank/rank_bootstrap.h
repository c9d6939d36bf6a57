#pragma once
// What every dtrain executable does first, once its flags are read: MPI up (MPI_THREAD_MULTIPLE),
// the rank's place in the job, its share of the host's CPUs (claimed before any thread starts, so
// threads inherit it), and its GPU. One object in main, alive until the program's work is done.
#include "runtime/mpi/mpi_scope.h"
#include "runtime/rank/cpu_affinity.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_context.h"

namespace dtrain::runtime {

struct BootstrapOptions {
  bool bind_gpu = true;            // false: CPU mode, no GPU bound or counted (--device cpu)
  bool allow_gpu_sharing = false;  // more local ranks than GPUs is fine (tests, debugging)
  bool claim_cpu_share = false;    // pin the rank to its share of the host's CPUs (logged if widened)
};

class RankBootstrap {
 public:
  // Collective over MPI_COMM_WORLD (the GPU placement check).
  RankBootstrap(int* argc, char*** argv, const BootstrapOptions& options);
  RankBootstrap(const RankBootstrap&) = delete;
  RankBootstrap& operator=(const RankBootstrap&) = delete;

  const RankContext& ctx() const { return ctx_; }
  const GpuBinding& gpu() const { return gpu_; }
  // The bound GPU's index, or -1 in CPU mode or on a simulated GPU.
  int real_gpu_index() const { return !gpu_.cpu_mode && !gpu_.device.simulated ? gpu_.device.index : -1; }

 private:
  MpiScope mpi_;
  RankContext ctx_;
  GpuBinding gpu_;
};

}  // namespace dtrain::runtime
