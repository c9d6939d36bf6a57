// Element-wise kernels of the collectives: widen 16-bit to fp32, narrow fp32 to 16-bit (rounding
// once, to nearest even, as the host path in host_reduce.cc does), scale fp32, and the ring's
// add-and-scale (the same arithmetic as host_reduce.cc's add_scaled, so results are bitwise equal).
// Memory-bound: grid-stride loops over the buffer, one element per thread per iteration.
#include <algorithm>

#include "comm/cuda/convert_kernels.cuh"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_elements.cuh"

namespace dtrain::comm::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(size_t n) {
  // Enough blocks to fill an H100/H200 several times over; the grid-stride loop covers the rest.
  return static_cast<int>(std::min<size_t>((n + kThreads - 1) / kThreads, 132 * 32));
}

using runtime::cuda::load;
using runtime::cuda::store;

template <typename T>
__global__ void widen_kernel(const T* __restrict__ src, float* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    dst[i] = load(src, i);
  }
}

template <typename T>
__global__ void narrow_kernel(const float* __restrict__ src, float scale, T* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    store(dst, i, src[i] * scale);
  }
}

__global__ void scale_kernel(const float* src, float scale, float* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    dst[i] = src[i] * scale;
  }
}

__global__ void add_scaled_kernel(float* out, const float* a, const float* __restrict__ b, float scale, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    out[i] = (a[i] + b[i]) * scale;
  }
}

}  // namespace

void launch_add_scaled(float* out, const float* a, const float* b, size_t n, float scale, cudaStream_t stream) {
  if (n == 0) return;
  add_scaled_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, a, b, scale, n);
  DTRAIN_CUDA_CHECK(cudaGetLastError());
}

void launch_widen(const void* src, Half16 type, float* dst, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (type == Half16::kF16) {
    widen_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const __half*>(src), dst, n);
  } else {
    widen_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(src), dst, n);
  }
  DTRAIN_CUDA_CHECK(cudaGetLastError());
}

void launch_narrow(const float* src, float scale, void* dst, Half16 type, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (type == Half16::kF16) {
    narrow_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, scale, static_cast<__half*>(dst), n);
  } else {
    narrow_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, scale, static_cast<__nv_bfloat16*>(dst), n);
  }
  DTRAIN_CUDA_CHECK(cudaGetLastError());
}

void launch_scale(const float* src, float scale, float* dst, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, scale, dst, n);
  DTRAIN_CUDA_CHECK(cudaGetLastError());
}

void load_kernels() {
  // cudaFuncGetAttributes loads a kernel that CUDA's lazy module loading has not loaded yet.
  cudaFuncAttributes attributes;
  DTRAIN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, add_scaled_kernel));
  DTRAIN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, scale_kernel));
  DTRAIN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, widen_kernel<__half>));
  DTRAIN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, widen_kernel<__nv_bfloat16>));
  DTRAIN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, narrow_kernel<__half>));
  DTRAIN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, narrow_kernel<__nv_bfloat16>));
}

}  // namespace dtrain::comm::cuda
