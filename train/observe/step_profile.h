#pragma once
// A model's step profile for dtrain-project (bench/project/): how long forward, backward and the
// optimizer take on one rank, and when in backward each gradient range is written, at one batch
// size. The projection turns it into buckets of any size and overlaps their all-reduces with the
// backward still to run, so it keeps the ranges as backward reported them, not the run's buckets.
//
// Written by dtrain-train (--profile-out, over --profile-steps) and dtrain-bench-train
// (--profile-out, extra steps after the measured ones). Each value in the file is the median over
// the profiled steps. With gradient accumulation only the last micro-batch is profiled (its
// backward is the one that all-reduces). On more than one rank the times are rank 0's and include
// whatever its all-reduces cost backward (the projection wants a 1-rank profile).
//
// The file (JSON, "format": "dtrain-step-profile", "version": 1): model, precision, device,
// batch_per_gpu, accumulation_steps, world_size, steps_profiled, step_ms (the run's own median step, 0 where it has
// none), forward_ms, backward_ms, optimizer_ms, gradient_bytes_per_element, bucket_bytes, tail_bucket_bytes,
// first_bucket_bytes (the sizes the engine's bucket plan was cut with), and
// gradients: [{offset, elements, ready_ms}] in the order backward wrote them, ready_ms counted
// from backward's start. bench/project/step_profile.py reads it and names what is wrong with it.
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::train {

// One gradient range of the flat fp32 buffer: written `ready` seconds after backward began.
struct GradientReady {
  int64_t offset = 0;
  int64_t elements = 0;
  double ready = 0;
};

// One profiled step (or its last micro-batch): durations in seconds.
struct StepPhases {
  double forward = 0;
  double backward = 0;
  double optimizer = 0;
  std::vector<GradientReady> gradients;
};

// What the file says about the run besides the times.
struct ProfileSource {
  std::string model;           // "resnet50"
  std::string precision;       // "bf16", "fp32"
  std::string device;          // "cpu", "NVIDIA H100 80GB HBM3"
  int batch_per_gpu = 0;       // of one micro-batch, the one profiled
  int accumulation_steps = 1;  // micro-batches per optimizer step
  int world_size = 1;
  int64_t bucket_bytes = 0;        // the body's (comm/gradient_sync/bucket_plan.h)
  double step_ms = 0;              // the run's measured median optimizer step; 0: none
  int64_t tail_bucket_bytes = 0;   // 0: no small bucket at the end
  int64_t first_bucket_bytes = 0;  // 0: no small bucket at the start
};

// The profiled steps of one run, and the file made of their medians.
class StepProfile {
 public:
  // Every step must report the same ranges (the same model); a step that does not is an error
  // naming the range.
  void add(StepPhases phases);
  size_t steps() const { return steps_.size(); }
  std::string json(const ProfileSource& source) const;
  // Writes json(source) to `path` atomically; `what` names the flag in errors.
  void write(const std::string& path, const ProfileSource& source, const std::string& what) const;

 private:
  std::vector<StepPhases> steps_;
};

}  // namespace dtrain::train
