#pragma once
// DTRAIN_CUDA_GRAPHS: whether the GPU step replays a captured CUDA graph (train/engine/cuda/
// step_graph.h). On by default: unset, empty or 1 replays graphs where they apply (the step says
// where they do not); 0 is the eager step; anything else is a UsageError naming the variable.
#include <optional>
#include <string>

namespace dtrain::train {

// The setting from the variable's value (nullopt: unset).
bool parse_cuda_graphs_setting(const std::optional<std::string>& value);
// The setting from this process's environment.
bool cuda_graphs_from_environment();

}  // namespace dtrain::train
