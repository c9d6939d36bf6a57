#pragma once
// The file that keeps measured convolution plans between processes (models/cuda/conv_plan_cache):
// measuring every shape, pass and beta of ResNet-50 costs ~50 s at the start of each run, and the
// winner for a shape depends only on the GPU model and the cuDNN version, which the file's name
// and first line record. A plan is stored as what rebuilds it without measuring: cuDNN's global
// engine index and the engine's knob choices.
//
// Text, one plan per line, so a person can read and delete entries:
//   <key> engine=<index> knobs=<type>:<value>,... ms=<measured time>
// Plain C++ (no CUDA), so the format is tested on machines without a GPU.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::models {

struct StoredConvPlan {
  int64_t engine = -1;
  std::vector<std::pair<int64_t, int64_t>> knobs;  // cuDNN knob type, value
  float measured_ms = 0;
};

// By key: a text without whitespace that names shape, numerics, pass and beta.
using StoredConvPlans = std::map<std::string, StoredConvPlan>;

// The plans in `path` when its first line is `header`. A missing file, or one written for another
// GPU, cuDNN or format (another first line), gives none. A line that does not parse is skipped
// with a warning naming the file and line; the plans after it still count.
StoredConvPlans read_conv_plan_file(const std::string& path, const std::string& header);

// Writes `plans` under `header` to `path` whole or not at all: into a temporary file beside it
// (unique to this process and host), then renamed over it, so ranks that share the file never
// read half of one. Creates the folder when missing. False, with the reason in `error`, when it
// cannot write.
bool write_conv_plan_file(const std::string& path, const std::string& header, const StoredConvPlans& plans,
                          std::string* error);

// One line of the file (without the newline), and its parse; false when the line is malformed.
std::string format_conv_plan_line(const std::string& key, const StoredConvPlan& plan);
bool parse_conv_plan_line(const std::string& line, std::string* key, StoredConvPlan* plan);

}  // namespace dtrain::models
