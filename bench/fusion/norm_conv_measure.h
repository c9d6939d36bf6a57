#pragma once
// Timing of one probed graph at full size: the fused plan against the unfused sequence today's
// step runs (scale-bias-ReLU kernel over x, plain convolution or wgrad plan, statistics kernel over
// y; each where the pattern has that part).
// Each side's plan is chosen the way the step chooses (the fastest of cuDNN's heuristic
// candidates, a short timing each); then warm-up runs and the median of the timed samples. A sample
// is `runs_per_sample` runs queued back to back between two CUDA events on the probe's stream,
// divided by that count, so that the host's launch latency (a kernel launch or a
// cudnnBackendExecute) hides behind the GPU's work as it does in a step. The unfused side is timed
// as one queued sequence (prologue kernel, convolution, statistics kernel), the way the step runs
// it; its parts are also timed alone for the table.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>
#include <vector>

#include "bench/fusion/norm_conv_graph.h"

namespace dtrain::bench::fusion {

struct TimingOptions {
  int warmup = 10;
  int iterations = 50;       // timed samples; the median is reported
  int runs_per_sample = 20;  // runs queued back to back per sample
  int candidates = 8;        // fused and plain plans finalized and timed per graph
  // The fused graph's engines: all but the runtime-compiled ones with --no-runtime-compiled; the
  // table marks which are nondeterministic or compiled at plan time.
  EngineFilter fused_filter{true, true, true};
  uint64_t seed = 0;
};

struct Measurement {
  // "ok"; "unsupported" (no engine ran the fused graph); "rejected: <cuDNN's refusal of the fused
  // graph>"; "error: <which part>: <cuDNN's error>" (a plain plan missing or failing, a variant pack
  // or a run cuDNN refused; the times measured before it stay).
  std::string status = "ok";
  std::vector<HeuristicAnswer> heuristics;  // for the fused graph, per mode: offered, or the failure
  std::vector<EngineNotes> engines;         // the fused plans that finalized, the chosen one first
  std::vector<EngineNotes> refused;         // offered but refused (filter, finalize, workspace or run)
  int offered = 0;                          // configurations the heuristics offered for the fused graph
  int64_t conv_engine = -1;
  // Medians; prologue and statistics 0 where the pattern has none. conv_ms is the plain
  // convolution's (forward or wgrad, as the pattern); unfused_ms the whole unfused sequence's, which
  // the saving is computed from; parts_ms() the sum of its parts timed alone, for comparison.
  double conv_ms = 0, prologue_ms = 0, stats_ms = 0, unfused_ms = 0, fused_ms = 0;
  double parts_ms() const { return conv_ms + prologue_ms + stats_ms; }
  std::string plan_description;     // cuDNN's JSON of the chosen fused plan, "" if it gives none
  bool needs_zeroed_stats = false;  // the fused statistics came out right only onto zeroed outputs
  // The fused plan's outputs against the unfused path's at full size: `compared` says which
  // ("sum/sqsum" of a statistics graph, "sums of Y" (the probe's statistics of the fused Y) for a
  // forward graph without them, "dW" for a weight gradient); the error as the small check's.
  std::string compared;
  bool agree = true;
  double agree_error = 0;
};

// Throws only on CUDA failures; cuDNN refusing or failing is a status.
Measurement measure(cudnnHandle_t handle, cudaStream_t stream, const GraphSpec& spec, const TimingOptions& options);

}  // namespace dtrain::bench::fusion
