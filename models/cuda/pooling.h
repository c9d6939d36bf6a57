#pragma once
// Max pooling and global average pooling on the GPU, with the CPU reference's semantics
// (models/cpu/pooling.h): padding never wins the max, ties go to the first element in window
// order, and the argmax (the input's index within its image-channel plane) is kept for backward.
// Activations are fp32 or bf16 (runtime::bfloat16), NCHW or NHWC; arithmetic is fp32.
// Backward gathers (each input element sums the outputs that chose it), so it is deterministic
// and needs no atomics.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "models/cpu/pooling.h"

namespace dtrain::models::cuda {

template <typename T>
void max_pool_forward(cudaStream_t stream, const cpu::PoolShape& shape, bool channels_last, const T* x, T* y,
                      int32_t* argmax);
// Writes (does not add to) dx.
template <typename T>
void max_pool_backward(cudaStream_t stream, const cpu::PoolShape& shape, bool channels_last, const T* dy,
                       const int32_t* argmax, T* dx);

// y[n, c] = mean over the plane; y is [N, C] in either layout.
template <typename T>
void global_avg_pool_forward(cudaStream_t stream, int batch, int channels, int64_t spatial, bool channels_last,
                             const T* x, T* y);
template <typename T>
void global_avg_pool_backward(cudaStream_t stream, int batch, int channels, int64_t spatial, bool channels_last,
                              const T* dy, T* dx);

}  // namespace dtrain::models::cuda
