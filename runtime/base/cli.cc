#include "runtime/base/cli.h"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/base/top_level_handler.h"
#include "runtime/base/version.h"

namespace dtrain::runtime {
namespace {

bool is_bool_literal(const std::string& token) {
  return token == "true" || token == "false" || token == "1" || token == "0" || token == "yes" || token == "no";
}

// The flag a "--name" / "--name=value" token spells, in the declared spelling: underscores and
// hyphens are interchangeable, so "--batch_per_rank" finds "batch-per-rank". Null if unknown.
const po::option_description* find_long(const po::options_description& options, const std::string& name) {
  if (const po::option_description* d = options.find_nothrow(name, false, false, false)) return d;
  std::string hyphens = name;
  std::replace(hyphens.begin(), hyphens.end(), '_', '-');
  if (const po::option_description* d = options.find_nothrow(hyphens, false, false, false)) return d;
  std::string underscores = name;
  std::replace(underscores.begin(), underscores.end(), '-', '_');
  return options.find_nothrow(underscores, false, false, false);
}

// Rewrites the arguments into the declared spellings before Boost sees them: "--batch_per_rank"
// becomes "--batch-per-rank", and a switch followed by a literal ("--no-tf32 false") becomes
// "--no-tf32=false" (Boost would take the literal for a bare argument). Unknown flags are left for
// Boost to name.
std::vector<std::string> canonical_arguments(int argc, char** argv, const po::options_description& options) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string token = argv[i];
    if (token == "--") {  // everything after it is another program's (dtrain-run's PROGRAM ARGS)
      for (; i < argc; ++i) out.emplace_back(argv[i]);
      break;
    }
    if (token.rfind("--", 0) != 0 || token.size() == 2) {
      out.push_back(token);
      continue;
    }
    const size_t equals = token.find('=');
    const std::string name = token.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    const po::option_description* d = find_long(options, name);
    if (d == nullptr) {
      out.push_back(token);
      continue;
    }
    token = "--" + d->long_name() + (equals == std::string::npos ? "" : token.substr(equals));
    const bool is_switch = d->semantic()->min_tokens() == 0 && d->semantic()->max_tokens() > 0;
    if (is_switch && equals == std::string::npos && i + 1 < argc && is_bool_literal(argv[i + 1])) {
      token += std::string("=") + argv[++i];
    }
    out.push_back(token);
  }
  return out;
}

// Keeps the last occurrence of each flag, except list flags that collect every one (composing).
void keep_last_occurrences(po::parsed_options& parsed, const po::options_description& options) {
  std::map<std::string, size_t> last;
  for (size_t i = 0; i < parsed.options.size(); ++i) last[parsed.options[i].string_key] = i;
  std::vector<po::option> kept;
  for (size_t i = 0; i < parsed.options.size(); ++i) {
    const po::option& option = parsed.options[i];
    const po::option_description* d =
        option.position_key >= 0 ? nullptr : options.find_nothrow(option.string_key, false, false, false);
    const bool collects = d != nullptr && d->semantic()->is_composing();
    if (option.position_key >= 0 || collects || last[option.string_key] == i) kept.push_back(option);
  }
  parsed.options = std::move(kept);
}

// A flag's default as the help shows it ("0.1", not Boost's "0.10000000000000001"); empty: none.
std::string default_text(const po::option_description& option) {
  const std::string parameter = option.format_parameter();
  const size_t open = parameter.find("(=");
  if (open == std::string::npos || option.semantic()->min_tokens() == 0) return "";
  std::string text = parameter.substr(open + 2, parameter.rfind(')') - open - 2);
  std::istringstream number(text);
  double value = 0;
  if (number >> value && number.eof()) {
    std::ostringstream shorter;
    shorter << value;
    text = shorter.str();
  }
  return text;
}

}  // namespace

std::string flag_name(const std::string& name) {
  std::string out = "--" + name;
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

ParsedCommandLine parse_command_line(int argc, char** argv, po::options_description& options,
                                     const po::positional_options_description* positional, int style) {
  options.add_options()("help,h", "print this help and exit")("version", "print the version and exit");
  const std::string program = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "dtrain";
  ParsedCommandLine parsed;
  try {
    po::command_line_parser parser(canonical_arguments(argc, argv, options));
    parser.options(options).style(style & ~po::command_line_style::allow_guessing);
    if (positional != nullptr) parser.positional(*positional);
    po::parsed_options options_given = parser.run();
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
    keep_last_occurrences(options_given, options);
    po::store(options_given, parsed.values);
    if (parsed.values.count("version")) {
      std::cout << program << " (dtrain " << DTRAIN_VERSION_STRING << ")\n";
      throw ExitRequested{0};
    }
    parsed.help = parsed.values.count("help") > 0;
    if (!parsed.help) po::notify(parsed.values);
  } catch (const po::error& e) {
    DTRAIN_USAGE_FAIL() << program << ": " << e.what() << " (run " << program << " --help for the flags)";
  }
  return parsed;
}

po::typed_value<bool>* switch_value() {
  return po::value<bool>()->implicit_value(true, "");
}

bool switch_on(const po::variables_map& values, const std::string& name) {
  return values.count(name) > 0 && values[name].as<bool>();
}

std::string usage(const std::string& program, const po::options_description& options, const std::string& arguments) {
  std::ostringstream out;
  out << "usage: " << program << " " << arguments << "\n\n";
  for (const auto& option : options.options()) {
    const po::value_semantic& value = *option->semantic();
    std::string names = option->long_name().empty() ? "" : "--" + option->long_name();
    const std::string short_name = option->canonical_display_name(po::command_line_style::allow_dash_for_short);
    if (short_name.size() == 2 && short_name[0] == '-' && short_name[1] != '-') {
      names += (names.empty() ? "" : ", ") + short_name;
    }
    // A switch (bare, or =true/=false) shows no value; a flag its placeholder.
    const bool is_switch = value.min_tokens() == 0;
    if (!is_switch) names += " VALUE";
    out << "  " << std::left << std::setw(34) << names << " " << option->description();
    const std::string shown = default_text(*option);
    if (!shown.empty()) out << " [" << shown << "]";
    out << "\n";
  }
  if (options.find_nothrow("help", false) == nullptr) {  // parsed with these beside (dtrain-export's positionals)
    out << "  " << std::left << std::setw(34) << "--help, -h"
        << " print this help and exit\n";
    out << "  " << std::left << std::setw(34) << "--version"
        << " print the version and exit\n";
  }
  out << "\nA switch works bare (--name) or with a value (--name=false); the last of a repeated flag wins.\n";
  return out.str();
}

}  // namespace dtrain::runtime
