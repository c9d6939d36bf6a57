#include <cuda_bf16.h>

#include <algorithm>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/resident_grid.h"
#include "train/engine/cuda/normalize_images.h"

namespace dtrain::train::cuda {
namespace {

struct Affine {  // per channel: x * scale + shift, with scale = 1 / (255 std), shift = -mean / std
  float scale[4], shift[4];
};

Affine affine(const ImageBatchDims& d, const float mean[3], const float std[3]) {
  DTRAIN_CHECK(d.batch > 0 && d.height > 0 && d.width > 0 && d.channels >= 1 && d.channels <= 4)
      << "normalize_images: bad batch " << d.batch << "x" << d.height << "x" << d.width << "x" << d.channels;
  Affine a{};
  for (int c = 0; c < d.channels; ++c) {
    a.scale[c] = 1.0f / (255.0f * std[c]);
    a.shift[c] = -mean[c] / std[c];
  }
  return a;
}

// Reads are coalesced (consecutive threads, consecutive input bytes); NCHW writes scatter over C
// planes, which is the reference path's price.
__global__ void nchw_f32_kernel(int64_t n, int channels, int64_t plane, const uint8_t* __restrict__ in, Affine a,
                                float* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int c = static_cast<int>(i % channels);
    const int64_t pixel = i / channels;
    const int64_t image = pixel / plane, p = pixel % plane;
    out[(image * channels + c) * plane + p] = __fadd_rn(__fmul_rn(in[i], a.scale[c]), a.shift[c]);
  }
}

__global__ void nhwc_bf16_kernel(int64_t n, int channels, const uint8_t* __restrict__ in, Affine a,
                                 __nv_bfloat16* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int c = static_cast<int>(i % channels);
    out[i] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(in[i], a.scale[c]), a.shift[c]));
  }
}

}  // namespace

void normalize_images_nchw_f32(cudaStream_t stream, const ImageBatchDims& d, const uint8_t* nhwc, const float mean[3],
                               const float std[3], float* out) {
  const Affine a = affine(d, mean, std);
  const int64_t plane = int64_t{d.height} * d.width;
  const int64_t n = d.batch * plane * d.channels;
  nchw_f32_kernel<<<runtime::cuda::one_wave_grid(runtime::cuda::kernel_address(nchw_f32_kernel), 256, n), 256, 0,
                    stream>>>(n, d.channels, plane, nhwc, a, out);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "normalize images (fp32 NCHW)";
}

void normalize_images_nhwc_bf16(cudaStream_t stream, const ImageBatchDims& d, const uint8_t* nhwc, const float mean[3],
                                const float std[3], runtime::bfloat16* out) {
  const Affine a = affine(d, mean, std);
  const int64_t n = int64_t{d.batch} * d.height * d.width * d.channels;
  nhwc_bf16_kernel<<<runtime::cuda::one_wave_grid(runtime::cuda::kernel_address(nhwc_bf16_kernel), 256, n), 256, 0,
                     stream>>>(n, d.channels, nhwc, a, reinterpret_cast<__nv_bfloat16*>(out));
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "normalize images (bf16 NHWC)";
}

}  // namespace dtrain::train::cuda
