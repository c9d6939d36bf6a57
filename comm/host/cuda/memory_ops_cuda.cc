// Device halves of memory_ops: async copies and the conversion kernels, on the call's stream.
#include <cuda_runtime_api.h>

#include "comm/collective.h"
#include "comm/cuda/convert_kernels.cuh"
#include "runtime/cuda/cuda_check.h"

namespace dtrain::comm::detail {
namespace {

cudaStream_t as_stream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

cuda::Half16 half_type(DType dtype) {
  DTRAIN_CHECK(dtype == DType::kF16 || dtype == DType::kBF16) << "not a 16-bit dtype: " << runtime::dtype_name(dtype);
  return dtype == DType::kF16 ? cuda::Half16::kF16 : cuda::Half16::kBF16;
}

}  // namespace

void device_copy_bytes(void* dst, const void* src, size_t bytes, void* stream) {
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)));
}

void device_zero_bytes(void* dst, size_t bytes, void* stream) {
  DTRAIN_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, as_stream(stream)));
}

void device_widen(const void* src, DType dtype, float* dst, size_t n, void* stream) {
  if (dtype == DType::kF32) return device_copy_bytes(dst, src, n * sizeof(float), stream);
  cuda::launch_widen(src, half_type(dtype), dst, n, as_stream(stream));
}

void device_narrow(const float* src, float scale, void* dst, DType dtype, size_t n, void* stream) {
  if (dtype == DType::kF32) {
    if (scale == 1.0f) return device_copy_bytes(dst, src, n * sizeof(float), stream);
    return cuda::launch_scale(src, scale, static_cast<float*>(dst), n, as_stream(stream));
  }
  cuda::launch_narrow(src, scale, dst, half_type(dtype), n, as_stream(stream));
}

}  // namespace dtrain::comm::detail
