#pragma once
// Validation metrics on the GPU, so evaluation never copies logits to the host: per row the
// cross-entropy loss (no label smoothing), top-1 and top-5 with the CPU path's rule
// (train::count_hits: classes scoring strictly above the label's logit; a row with a non-finite
// logit is a miss), summed into device accumulators that the host reads once per evaluation.
// Deterministic: rows are reduced in a fixed order.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/memory/dtype.h"

namespace dtrain::models::cuda {

struct EvalAccumulators {  // in device memory; zero it to start an evaluation
  double loss_sum;
  unsigned long long top1, top5, images;
};

// Adds the first `rows` rows of `logits` [>= rows x classes] to `totals`. A label outside
// [0, classes) makes the loss NaN and the row a miss.
template <typename T>
void accumulate_classification_metrics(cudaStream_t stream, int rows, int classes, const T* logits,
                                       const int32_t* labels, EvalAccumulators* totals);

}  // namespace dtrain::models::cuda
