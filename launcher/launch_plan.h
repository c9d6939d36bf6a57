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
//  - -x NAME[=value] (repeatable; the last one of a NAME wins): mpirun gets `-x NAME[=value]`;
//    srun gets `--export=ALL,NAME,...` with each value set in srun's own environment (srun reads
//    a ',' in --export as a separator, so values never go into that list). A NAME without a value
//    that is not set here is not forwarded, with a warning (mpirun only warns too).
//  - a hostfile may name a host on several lines (Open MPI's one line per slot) or as host:N; the
//    slots of a host add up, and mpirun gets them as -H (mpirun itself fails on a repeated host).
//  - --bind-to, --map-by, --oversubscribe, --npernode / -N: mpirun's own, passed on (the first
//    two replace the defaults above); under srun they are an error naming the flag.
//  - --output-filename DIR: mpirun's own option (DIR/1/rank.N/stdout and stderr); under srun
//    --output=DIR/rank.%t.out --error=DIR/rank.%t.err (%t: the rank).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "launcher/host_list.h"

namespace dtrain::launcher {

struct LaunchRequest {
  int np = 0;                     // 0: not given
  std::string hosts;              // -H
  std::string hostfile;           // --hostfile path
  std::string hostfile_contents;  // read by the caller
  std::vector<std::string> mpi_args;
  // mpirun's own options, passed on (mpirun modes only): --bind-to (default none), --map-by
  // (default slot), --oversubscribe, --npernode / -N (ranks per node; -np then defaults to that
  // many per host).
  std::string bind_to;
  std::string map_by;
  bool oversubscribe = false;
  int npernode = 0;                   // 0: not given
  std::vector<std::string> exported;  // -x NAME or -x NAME=value, in the order given
  std::string output_dir;             // --output-filename; empty: none
  std::vector<std::string> program;   // PROGRAM ARGS..., PROGRAM resolved to a path where it exists
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
  // Set in dtrain-run's own environment before it executes argv (srun passes them on).
  std::vector<std::pair<std::string, std::string>> environment;
  std::vector<std::string> warnings;  // for stderr; the launch goes on
};

// One -x argument: NAME, or NAME=value (has_value). UsageError naming -x when NAME is empty or not
// a variable name (letters, digits and '_', not starting with a digit).
struct ExportedVariable {
  std::string name;
  std::string value;
  bool has_value = false;
};
ExportedVariable parse_exported_variable(const std::string& argument);

// UsageError naming the flag on conflicting or impossible requests.
LaunchPlan plan_launch(const LaunchRequest& request, const LaunchEnvironment& environment);

// The argv as one line a shell would read back to the same argv (for --dry-run and --verbose).
std::string display_command(const std::vector<std::string>& argv);

// The plan as that line, preceded by its environment as NAME=value words (`NAME='a b' srun ...`).
std::string display_plan(const LaunchPlan& plan);

// Names of the environment variables a job gets from the launcher's environment.
bool forwarded_variable(const std::string& name);

}  // namespace dtrain::launcher
