#pragma once
// What the benchmarks record beside their tables: today's date and the command. (The JSON file
// itself: runtime::JsonObject, written with runtime::write_file_atomically.)
#include <string>

namespace dtrain::bench {

std::string utc_date();  // "2026-11-21"
// argv joined by spaces: the command a result came from.
std::string command_line(int argc, char** argv);

}  // namespace dtrain::bench
