#include "train/checkpoint/run_directory.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <system_error>

#include "runtime/base/error.h"

namespace dtrain::train {

std::string default_run_dir(const std::string& config_path, std::chrono::system_clock::time_point start) {
  const std::string stem = config_path.empty() ? "dtrain" : std::filesystem::path(config_path).stem().string();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(start);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char time[32];
  std::strftime(time, sizeof time, "%Y%m%dT%H%M%SZ", &utc);
  return "runs/" + (stem.empty() ? std::string("dtrain") : stem) + "-" + time;
}

std::string prepare_run_dir(const std::string& dir, bool fresh) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path parent = fs::path(dir).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  std::string chosen = dir;
  if (!ec) {
    // A fresh name is taken only by the run that created it; a given one may exist (a requeued
    // job's checkpoint_dir).
    for (int n = 2; fs::create_directory(chosen, ec) == false && !ec && fresh; ++n) {
      chosen = dir + "-" + std::to_string(n);
    }
  }
  DTRAIN_USAGE_CHECK(!ec && fs::is_directory(chosen) && ::access(chosen.c_str(), W_OK | X_OK) == 0)
      << "run_dir " << chosen << ": not a writable directory" << (ec ? ": " + ec.message() : std::string())
      << " (--run-dir sets where the config and final weights go)";
  return chosen;
}

}  // namespace dtrain::train
