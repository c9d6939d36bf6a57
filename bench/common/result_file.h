#pragma once
// What the benchmarks write beside their tables: today's date for the record, and the JSON file,
// written next to its target and renamed into place, so a failed run never leaves half a file.
#include <string>

namespace dtrain::bench {

std::string utc_date();  // "2026-11-21"
// argv joined by spaces: the command a result came from.
std::string command_line(int argc, char** argv);
// A UsageError naming `flag` and the path when it cannot be written.
void write_file_atomically(const std::string& path, const std::string& text, const std::string& flag);

}  // namespace dtrain::bench
