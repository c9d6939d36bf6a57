#include "launcher/launch_plan.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <utility>

#include "runtime/base/env.h"
#include "runtime/base/error.h"

namespace dtrain::launcher {
namespace {

// The word as a shell reads it back: plain, or in single quotes.
std::string shell_quoted(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789-_./:=,+@%") == std::string::npos;
  if (plain) return word;
  // Single quotes keep everything literal; a quote inside becomes '\'' (close, escaped, reopen).
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

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

// The -x arguments with the last one of each name kept, in the order the names first came.
std::vector<ExportedVariable> exported_variables(const std::vector<std::string>& arguments) {
  std::vector<ExportedVariable> variables;
  for (const std::string& argument : arguments) {
    ExportedVariable variable = parse_exported_variable(argument);
    auto same = std::find_if(variables.begin(), variables.end(),
                             [&](const ExportedVariable& v) { return v.name == variable.name; });
    if (same == variables.end()) {
      variables.push_back(std::move(variable));
    } else {
      *same = std::move(variable);
    }
  }
  return variables;
}

bool exported_by_name(const std::vector<ExportedVariable>& variables, const std::string& name) {
  return std::any_of(variables.begin(), variables.end(), [&](const ExportedVariable& v) { return v.name == name; });
}

// Whether a variable given without a value can be forwarded; a warning in the plan when not.
bool set_here(const ExportedVariable& variable, const LaunchEnvironment& environment, LaunchPlan& plan) {
  if (variable.has_value || environment.variables.count(variable.name)) return true;
  plan.warnings.push_back("dtrain-run: -x " + variable.name + ": " + variable.name +
                          " is not set in this environment; not forwarded");
  return false;
}

void add_mpirun_common(const LaunchRequest& request, const LaunchEnvironment& environment, int np,
                       const std::vector<ExportedVariable>& exported, LaunchPlan& plan) {
  std::vector<std::string>& argv = plan.argv;
  argv = {"mpirun", "-np", std::to_string(np)};
  if (environment.root) argv.push_back("--allow-run-as-root");
  // --npernode sets the mapping itself; mpirun refuses it beside --map-by.
  if (request.npernode > 0) {
    argv.insert(argv.end(), {"--npernode", std::to_string(request.npernode)});
  } else {
    argv.insert(argv.end(), {"--map-by", request.map_by.empty() ? "slot" : request.map_by});
  }
  argv.insert(argv.end(), {"--bind-to", request.bind_to.empty() ? "none" : request.bind_to});
  if (request.oversubscribe) argv.emplace_back("--oversubscribe");
  for (const auto& [name, value] : environment.variables) {
    if (forwarded_variable(name) && !exported_by_name(exported, name)) {
      argv.push_back("-x");
      argv.push_back(name);
    }
  }
  for (const ExportedVariable& variable : exported) {
    if (!set_here(variable, environment, plan)) continue;
    argv.push_back("-x");
    argv.push_back(variable.has_value ? variable.name + "=" + variable.value : variable.name);
  }
}

// Under srun, mpirun's options (--mpi-args, placement) have no meaning: an error naming each.
void refuse_mpirun_options(const LaunchRequest& request) {
  DTRAIN_USAGE_CHECK(request.mpi_args.empty()) << "dtrain-run: --mpi-args are mpirun options, and this run uses srun";
  for (const auto& [flag, given] : {std::pair<const char*, bool>{"--bind-to", !request.bind_to.empty()},
                                    {"--map-by", !request.map_by.empty()},
                                    {"--oversubscribe", request.oversubscribe},
                                    {"--npernode", request.npernode > 0}}) {
    DTRAIN_USAGE_CHECK(!given) << "dtrain-run: " << flag
                               << " is an mpirun option, and this run uses srun (srun places the tasks: give "
                                  "sbatch/srun --ntasks-per-node, --cpu-bind)";
  }
}

int slurm_tasks(const LaunchEnvironment& environment) {
  const auto it = environment.variables.find("SLURM_NTASKS");
  if (it == environment.variables.end()) return 0;
  return static_cast<int>(runtime::parse_int_in_range(it->second, 0, std::numeric_limits<int>::max(), "SLURM_NTASKS"));
}

}  // namespace

ExportedVariable parse_exported_variable(const std::string& argument) {
  ExportedVariable variable;
  const size_t eq = argument.find('=');
  variable.name = argument.substr(0, eq);
  variable.has_value = eq != std::string::npos;
  if (variable.has_value) variable.value = argument.substr(eq + 1);
  DTRAIN_USAGE_CHECK(!variable.name.empty())
      << "dtrain-run: -x '" << argument << "': no variable name (-x NAME or -x NAME=value)";
  const bool valid = !std::isdigit(static_cast<unsigned char>(variable.name[0])) &&
                     std::all_of(variable.name.begin(), variable.name.end(),
                                 [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  DTRAIN_USAGE_CHECK(valid) << "dtrain-run: -x '" << argument << "': '" << variable.name
                            << "' is not a variable name (letters, digits and '_', not starting with a digit)";
  return variable;
}

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
  const std::vector<ExportedVariable> exported = exported_variables(request.exported);
  LaunchPlan plan;
  const bool explicit_hosts = !request.hosts.empty() || !request.hostfile.empty();
  const bool in_slurm = environment.variables.count("SLURM_JOB_ID") > 0;
  if (explicit_hosts) {
    const std::vector<HostSlots> hosts = request.hosts.empty()
                                             ? parse_hostfile(request.hostfile_contents, request.hostfile)
                                             : parse_host_list(request.hosts);
    const int slots = total_slots(hosts);
    const int per_node = request.npernode > 0 ? request.npernode * static_cast<int>(hosts.size()) : slots;
    const int np = request.np > 0 ? request.np : std::min(per_node, slots);
    DTRAIN_USAGE_CHECK(np <= slots) << "dtrain-run: -np " << np << " is more than the " << slots << " slots of "
                                    << (request.hosts.empty() ? "" : "-H ")
                                    << (request.hosts.empty() ? request.hostfile : request.hosts);
    plan.mode = "mpirun";
    add_mpirun_common(request, environment, np, exported, plan);
    plan.argv.insert(plan.argv.end(), {"-H", join_hosts(hosts)});
  } else if (in_slurm) {
    const int tasks = slurm_tasks(environment);
    const int np = request.np > 0 ? request.np : tasks;
    DTRAIN_USAGE_CHECK(np > 0) << "dtrain-run: inside Slurm job " << environment.variables.at("SLURM_JOB_ID")
                               << " without SLURM_NTASKS; give -np";
    DTRAIN_USAGE_CHECK(tasks == 0 || np <= tasks)
        << "dtrain-run: -np " << np << " is more than the allocation's " << tasks << " tasks (SLURM_NTASKS)";
    if (environment.srun_available && environment.srun_supports_pmix) {
      plan.mode = "slurm-srun";
      // srun exports the whole environment by default; -x names are listed all the same (so that a
      // SLURM_EXPORT_ENV of the caller's does not drop them), their values set in srun's own
      // environment.
      plan.argv = {"srun", "--mpi=pmix", "--ntasks", std::to_string(np), "--kill-on-bad-exit=1"};
      std::string export_list = "--export=ALL";
      for (const ExportedVariable& variable : exported) {
        if (!set_here(variable, environment, plan)) continue;
        if (variable.has_value) plan.environment.emplace_back(variable.name, variable.value);
        export_list += "," + variable.name;
      }
      if (export_list != "--export=ALL") plan.argv.push_back(export_list);
      if (!request.output_dir.empty()) {
        DTRAIN_USAGE_CHECK(request.output_dir.find('%') == std::string::npos)
            << "dtrain-run: --output-filename " << request.output_dir
            << ": srun would read its '%' as a file name pattern; choose a directory without '%'";
        plan.argv.push_back("--output=" + request.output_dir + "/rank.%t.out");
        plan.argv.push_back("--error=" + request.output_dir + "/rank.%t.err");
      }
      plan.argv.insert(plan.argv.end(), {environment.dtrain_run_path, "--as-task", "--"});
    } else {
      plan.mode = "slurm-mpirun";
      add_mpirun_common(request, environment, np, exported, plan);
    }
  } else {
    const int np = request.np > 0 ? request.np : request.npernode;
    DTRAIN_USAGE_CHECK(np > 0) << "dtrain-run: give -np (the number of ranks) for a single-node run";
    plan.mode = "single-node";
    add_mpirun_common(request, environment, np, exported, plan);
    std::string localhost = "localhost:";
    localhost += std::to_string(np);
    plan.argv.insert(plan.argv.end(), {"-H", localhost});
  }
  if (plan.mode != "slurm-srun" && !request.output_dir.empty()) {
    plan.argv.insert(plan.argv.end(), {"--output-filename", request.output_dir});
  }
  if (plan.mode != "slurm-srun") {
    plan.argv.insert(plan.argv.end(), request.mpi_args.begin(), request.mpi_args.end());
  } else {
    refuse_mpirun_options(request);
  }
  plan.argv.insert(plan.argv.end(), request.program.begin(), request.program.end());
  return plan;
}

std::string display_command(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) {
    if (!line.empty()) line += ' ';
    line += shell_quoted(arg);
  }
  return line;
}

std::string display_plan(const LaunchPlan& plan) {
  std::string line;
  for (const auto& [name, value] : plan.environment) line += name + "=" + shell_quoted(value) + " ";
  return line + display_command(plan.argv);
}

}  // namespace dtrain::launcher
