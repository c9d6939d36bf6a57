#pragma once
// Element access for kernels over fp32, bf16 and fp16 buffers, and the grid of element-wise launches: loads widen to
// float, stores round to nearest even once. runtime::bfloat16 (the host-side type in our interfaces) has the bits of
// __nv_bfloat16; DeviceType maps one to the other for the kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>

#include "runtime/memory/dtype.h"

namespace dtrain::runtime::cuda {

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

// Whether every pointer is 16-byte aligned, as the vector loads and stores below and the kernels'
// float4 / int4 accesses need (host side: it picks the vector paths).
inline bool aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// 8 consecutive bf16 values (16 bytes at a 16-byte aligned address) widened to float, and 8 floats
// rounded to nearest even into them: the vector loads and stores of the bf16 NHWC kernels.
constexpr int kBf16x8 = 8;
// widen_bf16x8 is load_bf16x8's second half, for kernels that issue several 16-byte loads before
// they widen the first (8 floats a load held in registers would cost twice the 4 words of bf16).
__device__ inline void widen_bf16x8(const uint4& raw, float out[kBf16x8]) {
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < kBf16x8 / 2; ++k) {
    const float2 f = __bfloat1622float2(pairs[k]);
    out[2 * k] = f.x;
    out[2 * k + 1] = f.y;
  }
}
__device__ inline void load_bf16x8(const __nv_bfloat16* p, float out[kBf16x8]) {
  widen_bf16x8(*reinterpret_cast<const uint4*>(p), out);
}
__device__ inline void store_bf16x8(__nv_bfloat16* p, const float in[kBf16x8]) {
  uint4 raw;
  auto* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int k = 0; k < kBf16x8 / 2; ++k) pairs[k] = __floats2bfloat162_rn(in[2 * k], in[2 * k + 1]);
  *reinterpret_cast<uint4*>(p) = raw;
}

// Grid-stride element-wise launches: 256 threads per block, enough blocks for one element per
// thread up to 16 waves' worth of a full GPU (then the loop strides).
constexpr int kElementwiseThreads = 256;
inline unsigned elementwise_grid(int64_t n) {
  const int64_t blocks = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

}  // namespace dtrain::runtime::cuda
