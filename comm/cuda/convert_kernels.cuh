#pragma once
// Launchers of the element-wise kernels of the collectives (convert_kernels.cu).
#include <cuda_runtime_api.h>

#include <cstddef>

namespace dtrain::comm::cuda {

enum class Half16 { kF16, kBF16 };

// dst[i] = float(src[i]) for 16-bit src.
void launch_widen(const void* src, Half16 type, float* dst, size_t n, cudaStream_t stream);
// dst[i] = round(src[i] * scale) to 16-bit (round to nearest even, once).
void launch_narrow(const float* src, float scale, void* dst, Half16 type, size_t n, cudaStream_t stream);
// dst[i] = src[i] * scale, fp32 (in place allowed).
void launch_scale(const float* src, float scale, float* dst, size_t n, cudaStream_t stream);
// out[i] = (a[i] + b[i]) * scale, fp32: the ring's reduction on device buffers. out may be a.
void launch_add_scaled(float* out, const float* a, const float* b, size_t n, float scale, cudaStream_t stream);

// Loads every kernel above now. With CUDA's lazy loading (the default), the first launch of a
// kernel loads it, which can wait for the device to go idle; a launch from the comm worker while a
// stream-holding kernel (cuda/stream_flag.cuh) spins would then never return. DeviceStaging calls
// this before holding any stream.
void load_kernels();

}  // namespace dtrain::comm::cuda
