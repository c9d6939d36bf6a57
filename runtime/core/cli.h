#pragma once
// Command-line parsing for every dtrain executable (Boost.Program_options), so all tools reject
// bad flags the same way: a UsageError that names the flag.
#include <boost/program_options.hpp>
#include <string>

namespace dtrain::core {

namespace po = boost::program_options;

struct ParsedCommandLine {
  po::variables_map values;
  bool help = false;  // --help was given; the caller prints usage() and exits 0
};

// Adds --help to `options`, parses, and converts every Boost error (unknown flag, missing or
// malformed value) into a UsageError beginning with the program name. Without `positional`, a bare
// argument is a UsageError naming it too.
// `style` is Boost's command_line_style (dtrain-run adds allow_long_disguise for mpirun's "-np").
ParsedCommandLine parse_command_line(int argc, char** argv, po::options_description& options,
                                     const po::positional_options_description* positional = nullptr,
                                     int style = po::command_line_style::default_style);

// "usage: PROGRAM [options]\n" followed by the options table.
std::string usage(const std::string& program, const po::options_description& options);

}  // namespace dtrain::core
