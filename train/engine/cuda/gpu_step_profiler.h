#pragma once
// The GPU side of the step profile (train/observe/step_profile.h): timing events on the compute
// stream at the step's start, at the loss (forward's end), after each kernel that writes a
// gradient range, at backward's end and after the SGD update, so the times are when the GPU did
// the work. Recording only queues events; resolve() waits for the last one (the profiled step is
// the one place the host waits) and turns them into StepPhases. Events are made as needed and
// reused from step to step. Not thread-safe; one step at a time.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "runtime/cuda/stream.h"
#include "train/observe/step_profile.h"

namespace dtrain::train::cuda {

class GpuStepProfiler {
 public:
  // A new step: forgets the last one's marks and records its start on `stream`.
  void begin(cudaStream_t stream);
  void forward_done(cudaStream_t stream) { forward_ = mark(stream); }
  void gradient_ready(int64_t offset, int64_t elements, cudaStream_t stream);
  void backward_done(cudaStream_t stream) { backward_ = mark(stream); }
  void update_done(cudaStream_t stream) { update_ = mark(stream); }
  // Waits for the step's last mark and fills `out`. A step that missed a mark is an error.
  void resolve(StepPhases* out);

 private:
  size_t mark(cudaStream_t stream);
  double seconds(size_t from, size_t to) const;

  std::vector<runtime::CudaEvent> events_;
  size_t used_ = 0;
  size_t start_ = 0, forward_ = 0, backward_ = 0, update_ = 0;
  struct Range {
    int64_t offset, elements;
    size_t event;
  };
  std::vector<Range> ranges_;
};

}  // namespace dtrain::train::cuda
