#pragma once
// Gradient accumulation on the GPU: the fold of train/engine/gradient_accumulation.h for one
// finished range of fp32 gradients, queued on the compute stream right after the kernel that wrote
// them (and before the range is reported to the gradient synchronizer). The same floats as the host
// fold: plain adds and one correctly rounded division, no fused multiply-add.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "train/engine/gradient_accumulation.h"

namespace dtrain::train::cuda {

// `grads` and `sum`: n fp32 values each in device memory. count 1: queues nothing.
void accumulate_gradients(cudaStream_t stream, const MicroBatch& m, float* grads, float* sum, size_t n);

}  // namespace dtrain::train::cuda
