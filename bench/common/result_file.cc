#include "bench/common/result_file.h"

#include <ctime>
#include <filesystem>
#include <fstream>

#include "runtime/core/error.h"

namespace dtrain::bench {

std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d", std::gmtime(&now));
  return text;
}

std::string command_line(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) command += ' ';
    command += argv[i];
  }
  return command;
}

void write_file_atomically(const std::string& path, const std::string& text, const std::string& flag) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp);
    DTRAIN_USAGE_CHECK(out.good()) << flag << " " << path << ": cannot write " << temp;
    out << text;
    out.close();
    DTRAIN_USAGE_CHECK(out.good()) << flag << " " << path << ": write failed";
  }
  std::filesystem::rename(temp, path);
}

}  // namespace dtrain::bench
