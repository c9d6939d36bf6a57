#include "runtime/core/cli.h"

#include <filesystem>
#include <sstream>

#include "runtime/core/error.h"

namespace dtrain::core {

ParsedCommandLine parse_command_line(int argc, char** argv, po::options_description& options,
                                     const po::positional_options_description* positional, int style) {
  options.add_options()("help,h", "print this help and exit");
  const std::string program = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "dtrain";
  ParsedCommandLine parsed;
  try {
    po::command_line_parser parser(argc, argv);
    parser.options(options).style(style);
    if (positional != nullptr) parser.positional(*positional);
    const po::parsed_options options_given = parser.run();
    // Without a positional description Boost drops bare arguments silently (a forgotten --config
    // would train on defaults): name the first one instead.
    for (const po::option& option : options_given.options) {
      if (positional == nullptr && option.position_key >= 0) {
        const std::string token = option.original_tokens.empty() ? std::string() : option.original_tokens.front();
        DTRAIN_USAGE_FAIL() << program << ": unexpected argument '" << token
                            << "': every argument is a --flag or a flag's value (run " << program
                            << " --help for the flags)";
      }
    }
    po::store(options_given, parsed.values);
    parsed.help = parsed.values.count("help") > 0;
    if (!parsed.help) po::notify(parsed.values);
  } catch (const po::error& e) {
    DTRAIN_USAGE_FAIL() << program << ": " << e.what() << " (run " << program << " --help for the flags)";
  }
  return parsed;
}

std::string usage(const std::string& program, const po::options_description& options) {
  std::ostringstream out;
  out << "usage: " << program << " [options]\n" << options;
  return out.str();
}

}  // namespace dtrain::core
