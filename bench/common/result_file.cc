#include "bench/common/result_file.h"

#include <ctime>

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

}  // namespace dtrain::bench
