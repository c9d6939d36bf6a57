#pragma once
// The search for cuDNN execution plans of one convolution pass, through the graph (backend) API:
// cuDNN's heuristics (mode A, then the fallback list) propose engine configurations; each one that
// finalizes, fits the workspace limit and passes the numerics filter runs on the caller's real
// buffers, and the fastest wins. The legacy cudnnFind API reaches fewer engines: on Hopper it
// misses most of the sm90 warp-group kernels PyTorch's benchmark mode picks
// (bench/results/2026-11-24_h100). The process-wide cache and the plan file around the search
// are conv_plan_cache.h.
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
// The workspace limit is a quarter of the device's free memory, at most 1 GiB. Plans are built on
// a cuDNN handle of the search's own per device, alive as long as the process, so that a cached
// plan never refers to a handle a finished layer destroyed.
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/conv2d_shape.h"
#include "models/conv_plan_file.h"
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

// Measures the candidates for `key` on `measure_on` (writing the pass's output operand) on the
// stream of `caller`, which it synchronizes, and returns the fastest, with `candidates` set.
// `device` is the current device: the search's own handle for it builds the plans. Throws when no candidate passes the
// filter within the workspace limit, or none runs.
std::shared_ptr<const ConvPlan> measure_conv_plan(cudnnHandle_t caller, const ConvPlanKey& key,
                                                  const ConvOperands& measure_on, int device);

// The plan a file stored for `key`, built from its engine and knobs without measuring; nullptr when
// this cuDNN does not build it any more, the numerics filter refuses it, or it wants more workspace
// than the limit (the caller measures then). `device`: as for measure_conv_plan.
std::shared_ptr<const ConvPlan> rebuild_conv_plan(const ConvPlanKey& key, const StoredConvPlan& stored, int device);

// Whether `plan` runs on `operands` (writing the output operand, as measuring does) on the handle's
// stream, which it synchronizes: a stored plan that builds may still fail to execute, and must not
// take the job down when measuring would have skipped it.
bool conv_plan_runs(cudnnHandle_t handle, const ConvPlan& plan, const ConvOperands& operands);

// Queues `plan` on the handle's stream. workspace: at least plan.workspace_bytes of device memory.
void run_conv_plan(cudnnHandle_t handle, const ConvPlan& plan, const ConvOperands& operands, void* workspace);

}  // namespace dtrain::models::cuda
