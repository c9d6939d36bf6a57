#pragma once
// Element access for kernels over fp32, bf16 and fp16 buffers, and the grid of element-wise launches: loads widen to
// float, stores round to nearest even once. core::bfloat16 (the host-side type in our interfaces) has the bits of
// __nv_bfloat16; DeviceType maps one to the other for the kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "runtime/core/dtype.h"

namespace dtrain::core::cuda {

template <typename T>
struct DeviceType {
  using type = T;
};
template <>
struct DeviceType<bfloat16> {
  using type = __nv_bfloat16;
};
template <typename T>
using DeviceTypeOf = typename DeviceType<T>::type;

// clang-format off
__device__ inline float load(const float* p, int64_t i) { return p[i]; }
__device__ inline float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ inline float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ inline void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ inline void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ inline void store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
// clang-format on

// Grid-stride element-wise launches: 256 threads per block, enough blocks for one element per
// thread up to 16 waves' worth of a full GPU (then the loop strides).
constexpr int kElementwiseThreads = 256;
inline unsigned elementwise_grid(int64_t n) {
  const int64_t blocks = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

}  // namespace dtrain::core::cuda
