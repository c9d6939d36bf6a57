#pragma once
// DTRAIN_CUDA_GRAPHS: whether the GPU step replays a captured CUDA graph (train/engine/cuda/
// step_graph.h). Opt-in while it is new: unset, empty or 0 is the eager step; 1 turns graphs on;
// anything else is a UsageError naming the variable.
#include <optional>
#include <string>

namespace dtrain::train {

// The setting from the variable's value (nullopt: unset).
bool parse_cuda_graphs_setting(const std::optional<std::string>& value);
// The setting from this process's environment.
bool cuda_graphs_from_environment();

}  // namespace dtrain::train
