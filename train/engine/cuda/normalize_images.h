#pragma once
// The input kernel: a uint8 NHWC batch (what crosses PCIe, a quarter of fp32's bytes) normalized
// on the GPU, (x / 255 - mean[c]) / std[c] as train::normalize_batch does on the host, and written
// as fp32 NCHW (the reference path) or bf16 NHWC (the fast path).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/memory/dtype.h"

namespace dtrain::train::cuda {

struct ImageBatchDims {
  int batch = 0, height = 0, width = 0, channels = 3;
};

void normalize_images_nchw_f32(cudaStream_t stream, const ImageBatchDims& dims, const uint8_t* nhwc,
                               const float mean[3], const float std[3], float* out);
void normalize_images_nhwc_bf16(cudaStream_t stream, const ImageBatchDims& dims, const uint8_t* nhwc,
                                const float mean[3], const float std[3], runtime::bfloat16* out);

}  // namespace dtrain::train::cuda
