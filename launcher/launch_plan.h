#pragma once
// The command dtrain-run executes, built from its flags and the environment, as an argv vector:
// nothing passes through a shell, so host names and arguments cannot inject commands.
//  - mpirun: one rank per slot, ranks of a node consecutive (--map-by slot), no CPU binding
//    (each rank runs loader and communication threads besides compute; the GPU is chosen from the
//    local rank by dtrain itself), DTRAIN_*, NCCL_*, CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS and
//    LD_LIBRARY_PATH forwarded with -x, --allow-run-as-root only for root.
//  - single node (no -H, no hostfile, no Slurm): localhost with -np slots.
//  - inside a Slurm allocation (SLURM_JOB_ID set, no -H or hostfile): srun --mpi=pmix over the
//    allocation's tasks when srun supports PMIx, else mpirun, which reads the allocation itself;
//    -np defaults to SLURM_NTASKS. Under srun each task runs as `dtrain-run --as-task -- PROGRAM`
//    (task_wrapper.h: the job's exit status stays the failed rank's).
#include <map>
#include <string>
#include <vector>

#include "launcher/host_list.h"

namespace dtrain::launcher {

struct LaunchRequest {
  int np = 0;                     // 0: not given
  std::string hosts;              // -H
  std::string hostfile;           // --hostfile path
  std::string hostfile_contents;  // read by the caller
  std::vector<std::string> mpi_args;
  std::vector<std::string> program;  // PROGRAM ARGS..., PROGRAM already resolved to a path
};

struct LaunchEnvironment {
  std::map<std::string, std::string> variables;
  bool root = false;
  bool srun_available = false;
  bool srun_supports_pmix = false;
  std::string dtrain_run_path;  // this dtrain-run, which wraps each task under srun
};

struct LaunchPlan {
  std::string mode;  // "mpirun", "single-node", "slurm-srun" or "slurm-mpirun"
  std::vector<std::string> argv;
};

// UsageError naming the flag on conflicting or impossible requests.
LaunchPlan plan_launch(const LaunchRequest& request, const LaunchEnvironment& environment);

// The argv as one line a shell would read back to the same argv (for --dry-run and --verbose).
std::string display_command(const std::vector<std::string>& argv);

// Names of the environment variables a job gets from the launcher's environment.
bool forwarded_variable(const std::string& name);

}  // namespace dtrain::launcher
