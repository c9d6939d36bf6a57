#include "train/engine/cuda_graphs_setting.h"

#include "runtime/base/env.h"
#include "runtime/base/error.h"

namespace dtrain::train {

bool parse_cuda_graphs_setting(const std::optional<std::string>& value) {
  if (!value || value->empty() || *value == "1") return true;
  DTRAIN_USAGE_CHECK(*value == "0") << "DTRAIN_CUDA_GRAPHS is \"" << *value
                                    << "\"; 1 (replay the GPU step as a CUDA graph, the default) or 0 (eager) expected";
  return false;
}

bool cuda_graphs_from_environment() {
  return parse_cuda_graphs_setting(runtime::env_string("DTRAIN_CUDA_GRAPHS"));
}

}  // namespace dtrain::train
