#pragma once
// cuDNN execution plans for one convolution pass, chosen by measurement through the graph
// (backend) API: cuDNN's heuristics (mode A, then the fallback list) propose engine
// configurations; each one that finalizes, fits the workspace limit and passes the numerics filter
// runs on the caller's real buffers, and the fastest is kept in a process-wide cache, per shape,
// numerics, pass and beta. The legacy cudnnFind API reaches fewer engines: on Hopper it misses
// most of the sm90 warp-group kernels PyTorch's benchmark mode picks (bench/results/2026-11-24_h100).
//
// Numerics filter:
//   - no engine that converts inputs down (fp32 to fp16/bf16) or, for fp32 without TF32, that
//     uses tensor cores;
//   - no non-deterministic engine (atomics in split reductions): within a process, a pass's result
//     is a function of its inputs (which engine wins the timing can differ between runs and ranks);
//   - engines that reduce in lower precision (CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) are
//     allowed, as in PyTorch;
//   - no engine that compiles at run time (its first call costs seconds of NVRTC).
//
// Measured plans are also kept on disk (models/conv_plan_file.h), one file per GPU model and cuDNN
// version, in $DTRAIN_PLAN_CACHE (a folder; "off" for none), by default $XDG_CACHE_HOME/dtrain or
// ~/.cache/dtrain. A later process rebuilds a stored plan from its engine and knobs instead of
// measuring (ResNet-50's ~50 s of measuring at the first step), runs it once, and falls back to
// measuring when the stored plan does not build, passes the filter no more, wants more workspace
// than now fits, or fails to run.
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/conv2d_shape.h"
#include "models/cuda/conv_numerics.h"
#include "models/cuda/cudnn_backend.h"

namespace dtrain::models::cuda {

enum class ConvPass { kForward, kBackwardData, kBackwardFilter };
const char* conv_pass_name(ConvPass pass);

// A pass's three device operands in the graph's terms: x (or dx), w (or dw), y (or dy).
struct ConvOperands {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* y = nullptr;
};

struct ConvPlan {
  BackendDescriptor plan;
  int64_t workspace_bytes = 0;
  float measured_ms = 0;
  int64_t engine = -1;                             // cuDNN's global engine index
  std::vector<std::pair<int64_t, int64_t>> knobs;  // the engine's knob choices (type, value)
  int candidates = 0;                              // configurations measured to choose it; 0: from the file
};

struct ConvPlanKey {
  Conv2dShape geometry;
  ConvNumerics numerics = ConvNumerics::kBf16Nhwc;
  bool allow_tf32 = true;
  ConvPass pass = ConvPass::kForward;
  bool accumulate = false;  // beta 1: the output is added to (backward data of a residual join)
};

// The cached plan of `key`, measuring on `measure_on` first when this process has none. Measuring
// writes the pass's output operand, and synchronizes the handle's stream.
std::shared_ptr<const ConvPlan> conv_plan(cudnnHandle_t handle, const ConvPlanKey& key, const ConvOperands& measure_on);

// Queues `plan` on the handle's stream. workspace: at least plan.workspace_bytes of device memory.
void run_conv_plan(cudnnHandle_t handle, const ConvPlan& plan, const ConvOperands& operands, void* workspace);

// How many plans this process has measured (each key once), and how many it rebuilt from the file.
size_t conv_plans_measured();
size_t conv_plans_loaded();

// The file this process keeps plans in for the current GPU ("" when the cache is off).
std::string conv_plan_file_path();

// Forgets every plan in memory and keeps plans in `folder` from now on ("" for no file; nullopt:
// the folder the environment names): what a new process would do. For tests.
void reset_conv_plan_cache(const std::optional<std::string>& folder);

}  // namespace dtrain::models::cuda
