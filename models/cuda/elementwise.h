#pragma once
// Small element-wise GPU kernels the layers need around cuDNN and cuBLAS. Activations are fp32 or
// bf16 (runtime::bfloat16); biases and their gradients are fp32.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/memory/dtype.h"

namespace dtrain::models::cuda {

// y[r, c] += bias[c] for a row-major [rows, cols] y.
template <typename T>
void add_bias_rows(cudaStream_t stream, int rows, int cols, const float* bias, T* y);
// dbias[c] = sum over r of dy[r, c] (written, in a fixed order: deterministic).
template <typename T>
void bias_gradient(cudaStream_t stream, int rows, int cols, const T* dy, float* dbias);
// y = max(x + residual, 0) (residual may be null): the activation of a model without batch norm.
template <typename T>
void relu_forward(cudaStream_t stream, int64_t count, const T* x, const T* residual, T* y);
// dx = dy where y > 0, else 0; also written to dresidual when it is not null.
template <typename T>
void relu_backward(cudaStream_t stream, int64_t count, const T* y, const T* dy, T* dx, T* dresidual);
// dst[i] = float(src[i]): a bf16 weight gradient into the fp32 flat gradient buffer.
void widen_bf16(cudaStream_t stream, int64_t count, const runtime::bfloat16* src, float* dst);

}  // namespace dtrain::models::cuda
