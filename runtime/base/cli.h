#pragma once
// Command-line parsing for every dtrain executable (Boost.Program_options), so all tools read
// flags the same way, as users of argparse, torchrun and mpirun expect:
//   - hyphens are canonical and underscores accepted: --batch-per-rank and --batch_per_rank are
//     one flag (a tool declares the hyphenated name);
//   - a repeated flag: the last one wins ("append an override"), except list flags that collect
//     every occurrence (declared ->composing(), like dtrain-run's -x);
//   - no prefix guessing: --epoch is an unknown flag, not --epochs;
//   - a switch (declared with ->implicit_value("true")) works bare (--no-tf32), as --no-tf32=false,
//     and as --no-tf32 false;
//   - --help and --version on every tool.
// Every Boost error (unknown flag, missing or malformed value) becomes a UsageError naming the flag.
#include <boost/program_options.hpp>
#include <string>

namespace dtrain::runtime {

namespace po = boost::program_options;

struct ParsedCommandLine {
  po::variables_map values;
  bool help = false;  // --help was given; the caller prints usage() and exits 0
};

// Adds --help and --version to `options` and parses. --version prints "PROGRAM (dtrain VERSION)"
// and ends the program with status 0 (through ExitRequested, caught by the top-level handler).
// Without `positional`, a bare argument is a UsageError naming it.
// `style` is Boost's command_line_style (dtrain-run adds allow_long_disguise for mpirun's "-np");
// allow_guessing is always removed from it.
ParsedCommandLine parse_command_line(int argc, char** argv, po::options_description& options,
                                     const po::positional_options_description* positional = nullptr,
                                     int style = po::command_line_style::default_style);

// A switch: bare (on), or with a value (=true/=false, yes/no, 1/0), as every tool's switches are.
// Read it with switch_on(), which is false where the switch is not given.
po::typed_value<bool>* switch_value();
bool switch_on(const po::variables_map& values, const std::string& name);

// "usage: PROGRAM ARGUMENTS\n", then one line per flag, as dtrain-train's
// help: "--name, -n VALUE   description [default]".
std::string usage(const std::string& program, const po::options_description& options,
                  const std::string& arguments = "[options]");

// "--name" for a flag's canonical name ("batch_per_rank" -> "--batch-per-rank").
std::string flag_name(const std::string& name);

}  // namespace dtrain::runtime
