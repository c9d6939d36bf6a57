#pragma once
// The run directory: where rank 0 leaves what a run produced even without checkpoint_dir, so
// nothing trained is lost by default. It holds config.pbtxt (the effective config, for reading and
// for --config) and, without checkpoint_dir, the final weights as a checkpoint file. Which
// directory: run_dir, else checkpoint_dir (a requeued job keeps one directory for checkpoints,
// config and metrics), else runs/<config file's stem or dtrain>-<UTC start time>.
#include <chrono>
#include <string>

namespace dtrain::train {

// runs/<stem of config_path, or "dtrain" when empty>-<start as 20261123T124001Z>.
std::string default_run_dir(const std::string& config_path, std::chrono::system_clock::time_point start);

// Rank 0, before training: creates `dir` and its parents and checks that it is a writable
// directory; a UsageError naming it (and the field it came from) otherwise. fresh: `dir` is a
// default name; if it exists already (another run started in the same second) -2, -3, ... is
// appended instead of sharing it. Returns the directory used.
std::string prepare_run_dir(const std::string& dir, bool fresh);

}  // namespace dtrain::train
