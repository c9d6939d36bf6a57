#include "launcher/launch_plan.h"

#include <limits>

#include "runtime/core/env.h"
#include "runtime/core/error.h"

namespace dtrain::launcher {
namespace {

std::string join_hosts(const std::vector<HostSlots>& hosts) {
  std::string text;
  for (const HostSlots& h : hosts) {
    if (!text.empty()) text += ',';
    text += h.host;
    text += ':';
    text += std::to_string(h.slots);
  }
  return text;
}

void add_mpirun_common(const LaunchEnvironment& environment, int np, std::vector<std::string>& argv) {
  argv = {"mpirun", "-np", std::to_string(np)};
  if (environment.root) argv.push_back("--allow-run-as-root");
  for (const char* arg : {"--map-by", "slot", "--bind-to", "none"}) argv.emplace_back(arg);
  for (const auto& [name, value] : environment.variables) {
    if (forwarded_variable(name)) {
      argv.push_back("-x");
      argv.push_back(name);
    }
  }
}

int slurm_tasks(const LaunchEnvironment& environment) {
  const auto it = environment.variables.find("SLURM_NTASKS");
  if (it == environment.variables.end()) return 0;
  return static_cast<int>(core::parse_int_in_range(it->second, 0, std::numeric_limits<int>::max(), "SLURM_NTASKS"));
}

}  // namespace

bool forwarded_variable(const std::string& name) {
  return name.rfind("DTRAIN_", 0) == 0 || name.rfind("NCCL_", 0) == 0 || name == "CUDA_VISIBLE_DEVICES" ||
         name == "OMP_NUM_THREADS" || name == "LD_LIBRARY_PATH";
}

LaunchPlan plan_launch(const LaunchRequest& request, const LaunchEnvironment& environment) {
  DTRAIN_USAGE_CHECK(!request.program.empty())
      << "dtrain-run: no program to run (dtrain-run -np N [--] PROGRAM ARGS...)";
  DTRAIN_USAGE_CHECK(request.hosts.empty() || request.hostfile.empty())
      << "dtrain-run: -H and --hostfile both name the hosts; give one of them";
  DTRAIN_USAGE_CHECK(request.np >= 0) << "dtrain-run: -np " << request.np << " is not a rank count";
  LaunchPlan plan;
  const bool explicit_hosts = !request.hosts.empty() || !request.hostfile.empty();
  const bool in_slurm = environment.variables.count("SLURM_JOB_ID") > 0;
  if (explicit_hosts) {
    const std::vector<HostSlots> hosts = request.hosts.empty()
                                             ? parse_hostfile(request.hostfile_contents, request.hostfile)
                                             : parse_host_list(request.hosts);
    const int slots = total_slots(hosts);
    const int np = request.np > 0 ? request.np : slots;
    DTRAIN_USAGE_CHECK(np <= slots) << "dtrain-run: -np " << np << " is more than the " << slots << " slots of "
                                    << (request.hosts.empty() ? "" : "-H ")
                                    << (request.hosts.empty() ? request.hostfile : request.hosts);
    plan.mode = "mpirun";
    add_mpirun_common(environment, np, plan.argv);
    if (request.hosts.empty()) {
      plan.argv.insert(plan.argv.end(), {"--hostfile", request.hostfile});
    } else {
      plan.argv.insert(plan.argv.end(), {"-H", join_hosts(hosts)});
    }
  } else if (in_slurm) {
    const int tasks = slurm_tasks(environment);
    const int np = request.np > 0 ? request.np : tasks;
    DTRAIN_USAGE_CHECK(np > 0) << "dtrain-run: inside Slurm job " << environment.variables.at("SLURM_JOB_ID")
                               << " without SLURM_NTASKS; give -np";
    DTRAIN_USAGE_CHECK(tasks == 0 || np <= tasks)
        << "dtrain-run: -np " << np << " is more than the allocation's " << tasks << " tasks (SLURM_NTASKS)";
    if (environment.srun_available && environment.srun_supports_pmix) {
      plan.mode = "slurm-srun";
      // srun exports the whole environment by default, so nothing needs forwarding.
      plan.argv = {"srun",
                   "--mpi=pmix",
                   "--ntasks",
                   std::to_string(np),
                   "--kill-on-bad-exit=1",
                   environment.dtrain_run_path,
                   "--as-task",
                   "--"};
    } else {
      plan.mode = "slurm-mpirun";
      add_mpirun_common(environment, np, plan.argv);
    }
  } else {
    DTRAIN_USAGE_CHECK(request.np > 0) << "dtrain-run: give -np (the number of ranks) for a single-node run";
    plan.mode = "single-node";
    add_mpirun_common(environment, request.np, plan.argv);
    std::string localhost = "localhost:";
    localhost += std::to_string(request.np);
    plan.argv.insert(plan.argv.end(), {"-H", localhost});
  }
  if (plan.mode != "slurm-srun") {
    plan.argv.insert(plan.argv.end(), request.mpi_args.begin(), request.mpi_args.end());
  } else {
    DTRAIN_USAGE_CHECK(request.mpi_args.empty()) << "dtrain-run: --mpi-args are mpirun options, and this run uses srun";
  }
  plan.argv.insert(plan.argv.end(), request.program.begin(), request.program.end());
  return plan;
}

std::string display_command(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) {
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789-_./:=,+@%") == std::string::npos;
    if (!line.empty()) line += ' ';
    if (plain) {
      line += arg;
      continue;
    }
    // Single quotes keep everything literal; a quote inside becomes '\'' (close, escaped, reopen).
    line += '\'';
    for (char c : arg) {
      if (c == '\'') {
        line += "'\\''";
      } else {
        line += c;
      }
    }
    line += '\'';
  }
  return line;
}

}  // namespace dtrain::launcher
