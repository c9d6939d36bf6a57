#pragma once
// Softmax cross-entropy on the GPU, forward and backward in one pass, with the CPU reference's
// semantics (models/cpu/softmax_cross_entropy.h): label smoothing eps gives the target
// (1 - eps) * one_hot + eps / classes; the loss is the batch mean; dlogits = (softmax - target) / batch.
// Logits and their gradient are fp32 or bf16 (runtime::bfloat16); arithmetic is fp32.
// The mean loss and the count of top-1 hits land in device memory, so the host reads them only
// when it wants to (every K steps), never inside a step.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/memory/dtype.h"

namespace dtrain::models::cuda {

struct LossOutputs {
  float* mean_loss = nullptr;    // device scalar
  int32_t* top1_hits = nullptr;  // device scalar: rows whose largest logit is the label (ties: first index)
};

// Labels outside [0, classes) are a device-side error: they make the loss NaN rather than read
// out of bounds.
template <typename T>
void softmax_cross_entropy(cudaStream_t stream, int batch, int classes, const T* logits, const int32_t* labels,
                           float smoothing, T* dlogits, LossOutputs out);

}  // namespace dtrain::models::cuda
