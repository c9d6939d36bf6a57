#include "models/cuda/elementwise.h"
#include "models/cuda/elementwise_launch.cuh"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_elements.cuh"

namespace dtrain::models::cuda {
namespace {

using runtime::cuda::DeviceTypeOf;
using runtime::cuda::kElementwiseThreads;
using runtime::cuda::load;
using runtime::cuda::store;

template <typename T>
__global__ void add_bias_kernel(int64_t total, int cols, const float* __restrict__ bias, T* __restrict__ y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    store(y, i, load(y, i) + bias[i % cols]);
  }
}

// One thread per column; neighbouring threads read neighbouring columns of each row.
template <typename T>
__global__ void bias_gradient_kernel(int rows, int cols, const T* __restrict__ dy, float* __restrict__ dbias) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float sum = 0.0f;
  for (int r = 0; r < rows; ++r) sum += load(dy, int64_t{r} * cols + c);
  dbias[c] = sum;
}

template <typename T>
__global__ void relu_forward_kernel(int64_t n, const T* __restrict__ x, const T* __restrict__ residual,
                                    T* __restrict__ y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = load(x, i) + (residual != nullptr ? load(residual, i) : 0.0f);
    store(y, i, v > 0.0f ? v : 0.0f);
  }
}

template <typename T>
__global__ void relu_backward_kernel(int64_t n, const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                                     T* __restrict__ dresidual) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = load(y, i) > 0.0f ? load(dy, i) : 0.0f;
    store(dx, i, g);
    if (dresidual != nullptr) store(dresidual, i, g);
  }
}

__global__ void widen_kernel(int64_t n, const __nv_bfloat16* __restrict__ src, float* __restrict__ dst) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = __bfloat162float(src[i]);
  }
}

}  // namespace

template <typename T>
void add_bias_rows(cudaStream_t stream, int rows, int cols, const float* bias, T* y) {
  const int64_t n = int64_t{rows} * cols;
  if (n == 0) return;
  using D = DeviceTypeOf<T>;
  launch_elementwise(add_bias_kernel<D>, n, stream, "bias add", n, cols, bias, reinterpret_cast<D*>(y));
}

template <typename T>
void bias_gradient(cudaStream_t stream, int rows, int cols, const T* dy, float* dbias) {
  if (cols == 0) return;
  using D = DeviceTypeOf<T>;
  bias_gradient_kernel<D><<<(cols + kElementwiseThreads - 1) / kElementwiseThreads, kElementwiseThreads, 0, stream>>>(
      rows, cols, reinterpret_cast<const D*>(dy), dbias);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "bias gradient";
}

template <typename T>
void relu_forward(cudaStream_t stream, int64_t count, const T* x, const T* residual, T* y) {
  if (count == 0) return;
  using D = DeviceTypeOf<T>;
  launch_elementwise(relu_forward_kernel<D>, count, stream, "relu forward", count, reinterpret_cast<const D*>(x),
                     reinterpret_cast<const D*>(residual), reinterpret_cast<D*>(y));
}

template <typename T>
void relu_backward(cudaStream_t stream, int64_t count, const T* y, const T* dy, T* dx, T* dresidual) {
  if (count == 0) return;
  using D = DeviceTypeOf<T>;
  launch_elementwise(relu_backward_kernel<D>, count, stream, "relu backward", count, reinterpret_cast<const D*>(y),
                     reinterpret_cast<const D*>(dy), reinterpret_cast<D*>(dx), reinterpret_cast<D*>(dresidual));
}

void widen_bf16(cudaStream_t stream, int64_t count, const runtime::bfloat16* src, float* dst) {
  if (count == 0) return;
  launch_elementwise(widen_kernel, count, stream, "bf16 -> fp32", count, reinterpret_cast<const __nv_bfloat16*>(src),
                     dst);
}

template void relu_forward<float>(cudaStream_t, int64_t, const float*, const float*, float*);
template void relu_forward<runtime::bfloat16>(cudaStream_t, int64_t, const runtime::bfloat16*, const runtime::bfloat16*,
                                              runtime::bfloat16*);
template void relu_backward<float>(cudaStream_t, int64_t, const float*, const float*, float*, float*);
template void relu_backward<runtime::bfloat16>(cudaStream_t, int64_t, const runtime::bfloat16*,
                                               const runtime::bfloat16*, runtime::bfloat16*, runtime::bfloat16*);
template void add_bias_rows<float>(cudaStream_t, int, int, const float*, float*);
template void add_bias_rows<runtime::bfloat16>(cudaStream_t, int, int, const float*, runtime::bfloat16*);
template void bias_gradient<float>(cudaStream_t, int, int, const float*, float*);
template void bias_gradient<runtime::bfloat16>(cudaStream_t, int, int, const runtime::bfloat16*, float*);

}  // namespace dtrain::models::cuda
