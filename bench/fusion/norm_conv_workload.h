#pragma once
// The device buffers of one probed graph, the unfused path that today's step runs for it, and the
// small-instance check of both paths against a float64 CPU reference.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/fusion/norm_conv_graph.h"

namespace dtrain::bench::fusion {

// Device memory straight from cudaMalloc, freed when it goes (the probe runs outside the step's
// caching allocator).
struct FreeDeviceMemory {
  void operator()(void* p) const noexcept;
};
using DeviceMemory = std::unique_ptr<void, FreeDeviceMemory>;
DeviceMemory device_bytes(size_t bytes, const char* what);

// Buffers for `spec`: x, w, y, scale, bias, sum, sqsum (a wgrad graph reads dY from y and writes dW
// into w), and for the unfused path the activated input (ReLU(x * scale + bias), when the pattern
// has the prologue) and the statistics' scratch.
struct Workload {
  explicit Workload(const GraphSpec& spec);
  // Fills the inputs (x, scale, bias, and w or dY) with values uniform in the ranges the check uses
  // (seeded).
  void fill(cudaStream_t stream, uint64_t seed);

  GraphOperands fused() const;
  GraphOperands plain_conv() const;  // x is the activated input when the pattern has the prologue
  void unfused_prologue(cudaStream_t stream) const;
  void unfused_stats(cudaStream_t stream) const;  // sum and sqsum of what y holds
  // The convolution's output: Y, or dW (in w) for a weight gradient.
  void* output() const;
  size_t output_count() const;

  GraphSpec spec;
  GraphSpec conv_spec;  // plain(spec): the step's convolution
  DeviceMemory x, w, y, scale, bias, activated, sum, sqsum, partials;
};

// The output now on the device, widened (waits for the device).
std::vector<double> output_values(const Workload& wl);
// max |got - want| / (|want| + rms(want)) over the elements; NaN when any is.
double relative_error(const std::vector<double>& got, const std::vector<double>& want);

// The bound on relative_error and on the statistics' errors, in the check and at full size.
double error_bound(Element element);

// The workspace of the largest plan in `plans`.
DeviceMemory workspace_for(const std::vector<FusedPlan>& plans);

struct CheckResult {
  bool supported = false;  // some engine took the fused graph at this size
  bool passed = true;
  bool needs_zeroed_stats = false;  // a fused plan's sums came out right only onto zeroed outputs
  std::string output;               // "y" or "dW"
  int plans_checked = 0;
  double worst_output = 0, worst_stats = 0;  // worst errors over the fused plans and the unfused path
  double bound_output = 0, bound_stats = 0;
  std::string failure;  // which path and plan, when !passed
};

// On a small instance of `spec`'s pattern and element type (`shape`): fresh random inputs from
// `seed`, every fused plan and the unfused path against the float64 reference. The output's (Y's
// or dW's) error is relative_error's; the statistics' is |got - want| / sum|y| for the sums and
// |got - want| / want for the squares. Outputs start as NaN, so a plan that leaves one unwritten
// fails; one whose statistics come out NaN is run again onto zeroed sum and sqsum (an engine that
// adds onto them), and needs_zeroed_stats says so when that passes.
CheckResult check_small(cudnnHandle_t handle, cudaStream_t stream, const GraphSpec& spec, uint64_t seed,
                        const EngineFilter& fused_filter);

}  // namespace dtrain::bench::fusion
