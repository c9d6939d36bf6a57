// dtrain-run: starts a dtrain job with mpirun (hosts from -H or a hostfile, or one node), or with
// srun / mpirun inside a Slurm allocation, then becomes that command (exec), so its exit status is
// the job's. launch_plan.h has the rules.
//   dtrain-run -np 8 -H node1:4,node2:4 [--] PROGRAM ARGS...
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "launcher/launch_plan.h"
#include "launcher/shell_words.h"
#include "launcher/task_wrapper.h"
#include "runtime/core/cli.h"
#include "runtime/core/error.h"
#include "runtime/core/top_level_handler.h"

extern char** environ;

namespace dtrain::launcher {
namespace {
namespace fs = std::filesystem;

// A program name as given (a path when it holds '/', else searched on PATH), or a UsageError.
std::string resolve_program(const std::string& name) {
  auto executable = [](const fs::path& p) { return fs::is_regular_file(p) && access(p.c_str(), X_OK) == 0; };
  if (name.find('/') != std::string::npos) {
    DTRAIN_USAGE_CHECK(fs::exists(name)) << "dtrain-run: program " << name << " does not exist";
    DTRAIN_USAGE_CHECK(executable(name)) << "dtrain-run: program " << name << " is not an executable file";
    return name;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (executable(candidate)) return candidate.string();
  }
  DTRAIN_USAGE_FAIL() << "dtrain-run: program '" << name << "' not found on PATH";
}

bool on_path(const std::string& name) {
  try {
    resolve_program(name);
    return true;
  } catch (const core::UsageError&) {
    return false;
  }
}

// Whether this Slurm's srun offers the PMIx plugin (`srun --mpi=list`; a fixed command, no input).
bool srun_supports_pmix() {
  FILE* pipe = popen("srun --mpi=list 2>&1", "r");
  if (pipe == nullptr) return false;
  std::string output;
  char buffer[256];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  return pclose(pipe) == 0 && output.find("pmix") != std::string::npos;
}

// Splits argv into dtrain-run's own flags and PROGRAM ARGS...: at "--", or at the first word that
// is neither a flag nor the value of a flag that takes one (as `options` declares them).
int program_start(int argc, char** argv, const core::po::options_description& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return i;
    if (arg.empty() || arg[0] != '-') return i;
    const std::string name = arg.substr(arg.find_first_not_of('-'));
    const auto* option = options.find_nothrow(name, false);
    if (option != nullptr && name.find('=') == std::string::npos && option->semantic()->max_tokens() > 0) ++i;
  }
  return argc;
}

}  // namespace

int run(int argc, char** argv) {
  core::po::options_description options("dtrain-run options (then [--] PROGRAM ARGS...)");
  options.add_options()("np", core::po::value<int>(),
                        "number of ranks (default: all slots, or SLURM_NTASKS in a Slurm job)")(
      "H", core::po::value<std::string>(), "hosts and slots: node1:4,node2:4")(
      "hostfile", core::po::value<std::string>(), "Open MPI hostfile: one 'host slots=N' per line")(
      "mpi-args", core::po::value<std::string>(),
      "extra mpirun options, split into words as a shell would (quotes honoured, no expansion)")(
      "as-task", "run PROGRAM as one srun task (dtrain-run adds it under srun; see task_wrapper.h)")(
      "dry-run", "print the command instead of running it")("verbose", "print the command before running it");
  const int split = program_start(argc, argv, options);
  const core::ParsedCommandLine cli = core::parse_command_line(
      split, argv, options, nullptr,
      core::po::command_line_style::default_style | core::po::command_line_style::allow_long_disguise);
  if (cli.help) {
    std::cout << core::usage("dtrain-run", options);
    return 0;
  }
  LaunchRequest request;
  if (cli.values.count("np")) request.np = cli.values["np"].as<int>();
  DTRAIN_USAGE_CHECK(!cli.values.count("np") || request.np > 0)
      << "dtrain-run: -np must be positive, got " << request.np;
  if (cli.values.count("H")) request.hosts = cli.values["H"].as<std::string>();
  if (cli.values.count("hostfile")) {
    request.hostfile = cli.values["hostfile"].as<std::string>();
    std::ifstream in(request.hostfile);
    DTRAIN_USAGE_CHECK(in.good()) << "dtrain-run: --hostfile " << request.hostfile << ": cannot open the file";
    std::stringstream text;
    text << in.rdbuf();
    request.hostfile_contents = text.str();
  }
  if (cli.values.count("mpi-args")) {
    request.mpi_args = split_shell_words(cli.values["mpi-args"].as<std::string>(), "dtrain-run: --mpi-args");
  }
  const int first = split < argc && std::string(argv[split]) == "--" ? split + 1 : split;
  for (int i = first; i < argc; ++i) request.program.push_back(argv[i]);
  if (!request.program.empty()) request.program[0] = resolve_program(request.program[0]);
  if (cli.values.count("as-task")) return run_as_task(request.program);

  LaunchEnvironment environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) environment.variables[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  environment.root = geteuid() == 0;
  environment.dtrain_run_path = fs::read_symlink("/proc/self/exe").string();
  if (environment.variables.count("SLURM_JOB_ID")) {
    environment.srun_available = on_path("srun");
    environment.srun_supports_pmix = environment.srun_available && srun_supports_pmix();
  }
  const LaunchPlan plan = plan_launch(request, environment);
  if (cli.values.count("dry-run")) {
    std::cout << display_command(plan.argv) << "\n";
    return 0;
  }
  if (cli.values.count("verbose"))
    std::cerr << "dtrain-run (" << plan.mode << "): " << display_command(plan.argv) << "\n";
  std::vector<char*> args;
  for (const std::string& a : plan.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::cout.flush();
  execvp(args[0], args.data());
  DTRAIN_USAGE_FAIL() << "dtrain-run: cannot start " << args[0] << ": " << std::strerror(errno);
}

}  // namespace dtrain::launcher

// dtrain-run is no MPI rank (it becomes mpirun or srun), so it ends like any process: no MPI_Abort,
// and no MPI linked in.
int main(int argc, char** argv) {
  return dtrain::core::run_main_without_mpi(argc, argv, dtrain::launcher::run);
}
