#include "train/engine/cuda/gpu_step_profiler.h"

#include "runtime/base/error.h"

namespace dtrain::train::cuda {

void GpuStepProfiler::begin(cudaStream_t stream) {
  used_ = 0;
  ranges_.clear();
  forward_ = backward_ = update_ = 0;
  start_ = mark(stream);
}

void GpuStepProfiler::gradient_ready(int64_t offset, int64_t elements, cudaStream_t stream) {
  ranges_.push_back({offset, elements, mark(stream)});
}

size_t GpuStepProfiler::mark(cudaStream_t stream) {
  if (used_ == events_.size()) events_.emplace_back(true);
  events_[used_].record(stream);
  return used_++;
}

double GpuStepProfiler::seconds(size_t from, size_t to) const {
  return events_[to].elapsed_ms_since(events_[from]) * 1e-3;
}

void GpuStepProfiler::resolve(StepPhases* out) {
  // Marks are numbered in the order they were recorded, the start first: a later one is never 0.
  DTRAIN_CHECK(used_ > 0 && forward_ > start_ && backward_ > forward_ && update_ > backward_)
      << "profiled GPU step without its forward, backward and update marks";
  events_[update_].synchronize();
  out->forward = seconds(start_, forward_);
  out->backward = seconds(forward_, backward_);
  out->optimizer = seconds(backward_, update_);
  out->gradients.clear();
  for (const Range& r : ranges_) out->gradients.push_back({r.offset, r.elements, seconds(forward_, r.event)});
}

}  // namespace dtrain::train::cuda
