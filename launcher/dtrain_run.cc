// dtrain-run: starts a dtrain job with mpirun (hosts from -H or a hostfile, or one node), or with
// srun / mpirun inside a Slurm allocation, runs that command and exits with its status (the
// job's); a SIGTERM or SIGINT becomes a checkpoint and status 75 (stop_relay.h). launch_plan.h has
// the rules.
//   dtrain-run -np 8 -H node1:4,node2:4 [-x NAME[=value]]... [--output-filename DIR] [--] PROGRAM ARGS...
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "launcher/launch_plan.h"
#include "launcher/shell_words.h"
#include "launcher/stop_relay.h"
#include "launcher/task_wrapper.h"
#include "runtime/base/cli.h"
#include "runtime/base/error.h"
#include "runtime/base/top_level_handler.h"

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
  } catch (const runtime::UsageError&) {
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

// The option a flag word names, as the parser reads it: "--name[=value]", "-name[=value]" (mpirun's
// single-dash long names, "-np"), or "-c[value]" for a one-letter option ("-n 4", "-n4", "-x FOO").
// Null for a word no option takes; `value_attached` tells whether the word holds the value.
const runtime::po::option_description* named_option(const std::string& word,
                                                    const runtime::po::options_description& options,
                                                    bool& value_attached) {
  const bool double_dash = word.rfind("--", 0) == 0;
  const std::string body = word.substr(double_dash ? 2 : 1);
  const size_t eq = body.find('=');
  value_attached = eq != std::string::npos;
  std::string name = body.substr(0, eq);
  std::replace(name.begin(), name.end(), '_', '-');  // --dry_run is --dry-run, as in every tool
  const auto* option = options.find_nothrow(name, false);
  if (option != nullptr || double_dash || word.size() < 2) return option;
  value_attached = word.size() > 2;
  option = options.find_nothrow(word.substr(0, 2), false);
  // "-npernodes" is no "-n pernodes": a rank count attached to -n or -N is digits only.
  const std::string attached = word.substr(2);
  const bool counts = option != nullptr && (option->long_name() == "np" || option->long_name() == "npernode");
  if (counts && !std::all_of(attached.begin(), attached.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return nullptr;
  }
  return option;
}

// What to do instead of an option dtrain-run does not take.
std::string unknown_flag_hint(const std::string& word) {
  const std::string name = word.substr(0, word.find('='));
  if (name.find("nproc") != std::string::npos || name.find("nnodes") != std::string::npos) {
    return " (torchrun's; here -np is the number of ranks in all and --npernode / -N the ranks per node)";
  }
  return "; dtrain-run takes mpirun's -np, -H, --hostfile, -x, --bind-to, --map-by, --oversubscribe, --npernode and "
         "--output-filename, and passes any other mpirun option with --mpi-args '...' (dtrain-run --help)";
}

// Splits argv into dtrain-run's own flags and PROGRAM ARGS...: at "--", or at the first word that
// is neither a flag nor the value of a flag that takes one (as `options` declares them).
int program_start(int argc, char** argv, const runtime::po::options_description& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return i;
    if (arg.size() < 2 || arg[0] != '-') return i;
    bool value_attached = false;
    const auto* option = named_option(arg, options, value_attached);
    if (arg == "--help" || arg == "-h" || arg == "--version") continue;  // parse_command_line's own
    DTRAIN_USAGE_CHECK(option != nullptr)
        << "dtrain-run: unrecognised option '" << arg << "'" << unknown_flag_hint(arg);
    if (!value_attached && option->semantic()->min_tokens() > 0) {
      // Named as typed: Boost would call a missing -x value "--x".
      DTRAIN_USAGE_CHECK(i + 1 < argc) << "dtrain-run: " << arg << " needs a value (run dtrain-run --help)";
      ++i;
    }
  }
  return argc;
}

// dtrain-run's own flags, in mpirun's spellings where mpirun has one.
void declare_options(runtime::po::options_description& options) {
  options.add_options()("np,n", runtime::po::value<int>(),
                        "number of ranks, as mpirun's -np or -n (default: all slots, or SLURM_NTASKS in a Slurm job)")(
      "host,H", runtime::po::value<std::string>(), "hosts and slots, as mpirun's --host or -H: node1:4,node2:4")(
      "hostfile", runtime::po::value<std::string>(),
      "Open MPI hostfile: one 'host slots=N', 'host:N' or 'host' per line; a host on several lines gets their slots "
      "added up (one line per slot)")(
      ",x", runtime::po::value<std::vector<std::string>>()->composing(),
      "-x NAME or -x NAME=value: pass the variable (its value here, or the one given) to every rank, as mpirun's "
      "-x, under srun too; repeatable (DTRAIN_*, NCCL_*, CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS and "
      "LD_LIBRARY_PATH are always passed)")(
      "output-filename", runtime::po::value<std::string>(),
      "per-rank logs under DIR (created if missing). mpirun: DIR/1/rank.N/stdout and DIR/1/rank.N/stderr "
      "(Open MPI's layout; the output also stays on the terminal); srun: DIR/rank.N.out and "
      "DIR/rank.N.err only. N is the rank")(
      "bind-to", runtime::po::value<std::string>(),
      "as mpirun's --bind-to (core, socket, none); default none: each rank runs loader and communication "
      "threads besides compute")("map-by", runtime::po::value<std::string>(),
                                 "as mpirun's --map-by; default slot (a node's ranks consecutive)")(
      "oversubscribe", runtime::switch_value(), "as mpirun's --oversubscribe: more ranks than slots")(
      "npernode,N", runtime::po::value<int>(),
      "ranks per node, as mpirun's --npernode or -N (-np then defaults to that many per host)")(
      "mpi-args", runtime::po::value<std::string>(),
      "any other mpirun options, split into words as a shell would (quotes honoured, no expansion): "
      "--mpi-args '--mca btl tcp,self'")(
      "as-task", runtime::switch_value(),
      "run PROGRAM as one srun task (dtrain-run adds it under srun; see task_wrapper.h)")(
      "dry-run", runtime::switch_value(), "print the command instead of running it (PROGRAM need not exist)")(
      "verbose", runtime::switch_value(), "print the command before running it");
}

// The launch the flags ask for, each value checked; the hostfile is read here.
LaunchRequest request_from_flags(const runtime::po::variables_map& values) {
  LaunchRequest request;
  if (values.count("np")) request.np = values["np"].as<int>();
  DTRAIN_USAGE_CHECK(!values.count("np") || request.np > 0)
      << "dtrain-run: -np must be positive, got " << request.np << " (-np or -n: the number of ranks)";
  if (values.count("host")) request.hosts = values["host"].as<std::string>();
  DTRAIN_USAGE_CHECK(!values.count("host") || !request.hosts.empty())
      << "dtrain-run: --host (-H) is empty; expected host:slots[,host:slots...]";
  if (values.count("hostfile")) {
    request.hostfile = values["hostfile"].as<std::string>();
    std::ifstream in(request.hostfile);
    DTRAIN_USAGE_CHECK(in.good()) << "dtrain-run: --hostfile " << request.hostfile << ": cannot open the file";
    std::stringstream text;
    text << in.rdbuf();
    request.hostfile_contents = text.str();
  }
  if (values.count("-x")) request.exported = values["-x"].as<std::vector<std::string>>();
  if (values.count("output-filename")) {
    request.output_dir = values["output-filename"].as<std::string>();
    DTRAIN_USAGE_CHECK(!request.output_dir.empty()) << "dtrain-run: --output-filename needs a directory";
  }
  if (values.count("bind-to")) request.bind_to = values["bind-to"].as<std::string>();
  if (values.count("map-by")) request.map_by = values["map-by"].as<std::string>();
  request.oversubscribe = runtime::switch_on(values, "oversubscribe");
  if (values.count("npernode")) request.npernode = values["npernode"].as<int>();
  DTRAIN_USAGE_CHECK(!values.count("npernode") || request.npernode > 0)
      << "dtrain-run: --npernode (-N) must be positive, got " << request.npernode;
  if (values.count("mpi-args")) {
    request.mpi_args = split_shell_words(values["mpi-args"].as<std::string>(), "dtrain-run: --mpi-args");
  }
  return request;
}

// PROGRAM ARGS... from argv[split] on (after "--" when it is there), PROGRAM resolved on PATH.
std::vector<std::string> program_words(int argc, char** argv, int split, bool dry_run) {
  std::vector<std::string> program;
  const int first = split < argc && std::string(argv[split]) == "--" ? split + 1 : split;
  for (int i = first; i < argc; ++i) program.push_back(argv[i]);
  // A dry run prints the command for another machine too, where PROGRAM may be the only one.
  if (!program.empty() && (!dry_run || on_path(program[0]))) program[0] = resolve_program(program[0]);
  return program;
}

// What the plan depends on beyond the flags: the environment, who runs it, and Slurm's srun.
LaunchEnvironment this_environment() {
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
  return environment;
}

// Runs the plan's command (mpirun or srun) with its environment set, after creating the per-rank
// log directory, turning stop signals into checkpoints (stop_relay.h); returns its exit status.
int run_plan(const LaunchPlan& plan, const std::string& output_dir) {
  if (!output_dir.empty()) {
    std::error_code error;
    fs::create_directories(output_dir, error);
    DTRAIN_USAGE_CHECK(!error) << "dtrain-run: --output-filename " << output_dir
                               << ": cannot create the directory: " << error.message();
  }
  DTRAIN_USAGE_CHECK(on_path(plan.argv[0]))
      << "dtrain-run: cannot start " << plan.argv[0] << ": not found on PATH (is MPI installed?)";
  for (const auto& [name, value] : plan.environment) setenv(name.c_str(), value.c_str(), 1);
  return run_relaying_stop_signals(plan.argv, SIGUSR1);
}

}  // namespace

int run(int argc, char** argv) {
  runtime::po::options_description options("dtrain-run options (then [--] PROGRAM ARGS...)");
  declare_options(options);
  const int split = program_start(argc, argv, options);
  // mpirun's spellings: single-dash long names (-np, -host, -hostfile) and no prefix guessing
  // (with it, -n and --host were taken as prefixes of --np and --hostfile and failed).
  const int style =
      (runtime::po::command_line_style::default_style & ~runtime::po::command_line_style::allow_guessing) |
      runtime::po::command_line_style::allow_long_disguise;
  const runtime::ParsedCommandLine cli = runtime::parse_command_line(split, argv, options, nullptr, style);
  if (cli.help) {
    std::cout << runtime::usage("dtrain-run", options, "[options] [--] PROGRAM ARGS...");
    return 0;
  }
  const bool dry_run = runtime::switch_on(cli.values, "dry-run");
  LaunchRequest request = request_from_flags(cli.values);
  request.program = program_words(argc, argv, split, dry_run);
  if (runtime::switch_on(cli.values, "as-task")) return run_as_task(request.program);

  const LaunchPlan plan = plan_launch(request, this_environment());
  for (const std::string& warning : plan.warnings) std::cerr << warning << "\n";
  if (dry_run) {
    std::cout << display_plan(plan) << "\n";
    return 0;
  }
  if (runtime::switch_on(cli.values, "verbose"))
    std::cerr << "dtrain-run (" << plan.mode << "): " << display_plan(plan) << "\n";
  return run_plan(plan, request.output_dir);
}

}  // namespace dtrain::launcher

// dtrain-run is no MPI rank (it becomes mpirun or srun), so it ends like any process: no MPI_Abort,
// and no MPI linked in.
int main(int argc, char** argv) {
  return dtrain::runtime::run_main_without_mpi(argc, argv, dtrain::launcher::run);
}
