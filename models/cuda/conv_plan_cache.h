#pragma once
// The process-wide cache of cuDNN convolution plans (conv_plan_search.h finds them), per device,
// shape, numerics, pass and beta, so every layer of the same shape, and every later step, reuses a
// plan without measuring again. Thread-safe: one lock over the cache and the plan files.
//
// Measured plans are also kept on disk (models/conv_plan_file.h), one file per GPU model and cuDNN
// version, in $DTRAIN_PLAN_CACHE (a folder; "off" for none), by default $XDG_CACHE_HOME/dtrain or
// ~/.cache/dtrain. A later process rebuilds a stored plan from its engine and knobs instead of
// measuring (ResNet-50's ~50 s of measuring at the first step), runs it once, and falls back to
// measuring when the stored plan does not build, passes the filter no more, wants more workspace
// than now fits, or fails to run.
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "models/cuda/conv_plan_search.h"

namespace dtrain::models::cuda {

// The cached plan of `key`, measuring on `measure_on` first when this process has none. Measuring
// writes the pass's output operand, and synchronizes the handle's stream.
std::shared_ptr<const ConvPlan> conv_plan(cudnnHandle_t handle, const ConvPlanKey& key, const ConvOperands& measure_on);

// How many plans this process has measured (each key once), and how many it rebuilt from the file.
size_t conv_plans_measured();
size_t conv_plans_loaded();

// The file this process keeps plans in for the current GPU ("" when the cache is off).
std::string conv_plan_file_path();

// Forgets every plan in memory and keeps plans in `folder` from now on ("" for no file; nullopt:
// the folder the environment names): what a new process would do. For tests.
void reset_conv_plan_cache(const std::optional<std::string>& folder);

}  // namespace dtrain::models::cuda
