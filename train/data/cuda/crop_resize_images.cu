#include <algorithm>
#include <cmath>

#include "runtime/cuda/cuda_check.h"
#include "train/data/cuda/crop_resize_images.h"
#include "train/data/image_resize.h"

namespace dtrain::train::cuda {
namespace {

// One output pixel's filter along one axis, as fill_resample_taps computes it on the host: a
// triangle of half-width `support` around the pixel's centre in source coordinates, weights
// normalized to sum to 1, in double, each rounded once to float. The _rn intrinsics keep nvcc from
// fusing multiply-adds the host code does not fuse, so the weights are the host's to the bit.
struct Axis {
  double center = 0, support = 1, total = 0;
  int lo = 0, hi = 0;
  bool nearest = false;  // a region thinner than a pixel at the border: the nearest pixel, weight 1
};

__device__ double raw_weight(const Axis& a, int k) {
  const double d = fabs(__ddiv_rn(__dsub_rn(k + 0.5, a.center), a.support));
  return d < 1 ? 1 - d : 0;
}

__device__ Axis axis_at(double start, double length, int size, int out_size, int i) {
  Axis a;
  const double scale = __ddiv_rn(length, static_cast<double>(out_size));
  a.support = fmax(1.0, scale);
  a.center = __dadd_rn(start, __dmul_rn(i + 0.5, scale));
  a.lo = max(static_cast<int>(floor(__dsub_rn(a.center, a.support))), 0);
  a.hi = min(static_cast<int>(ceil(__dadd_rn(a.center, a.support))), size);
  for (int k = a.lo; k < a.hi; ++k) a.total = __dadd_rn(a.total, raw_weight(a, k));
  if (!(a.total > 0)) {
    a.nearest = true;
    a.lo = min(max(static_cast<int>(a.center), 0), size - 1);
    a.hi = a.lo + 1;
  }
  return a;
}

__device__ float weight(const Axis& a, int k) {
  return a.nearest ? 1.0f : static_cast<float>(__ddiv_rn(raw_weight(a, k), a.total));
}

// Rounded half up and clamped, as the host's to_byte.
__device__ uint8_t to_byte(float v) {
  const int rounded = static_cast<int>(__fadd_rn(v, 0.5f));
  return static_cast<uint8_t>(rounded < 0 ? 0 : rounded > 255 ? 255 : rounded);
}

// A job's table: out_width first pixels (as int bits), out_width x taps_across weights, then the
// same down.
__device__ float* across_table(float* taps, const CropResizeJob& job) {
  return taps + job.taps_offset;
}
__device__ float* down_table(float* taps, const CropResizeJob& job, int out_width) {
  return taps + job.taps_offset + static_cast<long>(out_width) * (1 + job.taps_across);
}

// Block x: one job; threads: its output pixels' filters on both axes, computed once each.
__global__ void taps_kernel(const CropResizeJob* __restrict__ jobs, int out_height, int out_width,
                            float* __restrict__ taps) {
  const CropResizeJob job = jobs[blockIdx.x];
  for (int e = threadIdx.x; e < out_width + out_height; e += blockDim.x) {
    const bool across = e < out_width;
    const int i = across ? e : e - out_width;
    const int count = across ? job.taps_across : job.taps_down;
    const int out_size = across ? out_width : out_height;
    float* table = across ? across_table(taps, job) : down_table(taps, job, out_width);
    const Axis a = across ? axis_at(job.x, job.region_width, job.width, out_size, i)
                          : axis_at(job.y, job.region_height, job.height, out_size, i);
    table[i] = __int_as_float(a.lo);
    float* w = table + out_size + static_cast<long>(i) * count;
    for (int k = 0; k < count; ++k) w[k] = a.lo + k < a.hi ? weight(a, a.lo + k) : 0.0f;
  }
}

// Block y: one job; threads: its output pixels. Each pixel sums its source rows' horizontal
// filters first, then weighs them vertically, in the host's order; a zero-weight tap, which adds
// +0 on the host, is skipped.
__global__ void resize_kernel(const CropResizeJob* __restrict__ jobs, int out_height, int out_width,
                              float* __restrict__ taps, uint8_t* __restrict__ out) {
  const CropResizeJob job = jobs[blockIdx.y];
  const int pixels = out_height * out_width;
  uint8_t* image = out + static_cast<long>(job.position) * pixels * 3;
  const float* across = across_table(taps, job);
  const float* down = down_table(taps, job, out_width);
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < pixels; o += gridDim.x * blockDim.x) {
    const int oy = o / out_width, ox = o % out_width;
    const int sx = job.flip ? out_width - 1 - ox : ox;
    const int first_x = __float_as_int(across[sx]), first_y = __float_as_int(down[oy]);
    const float* wx = across + out_width + static_cast<long>(sx) * job.taps_across;
    const float* wy = down + out_height + static_cast<long>(oy) * job.taps_down;
    float sum[3] = {0, 0, 0};
    for (int ky = 0; ky < job.taps_down; ++ky) {
      const float w = wy[ky];
      if (w == 0.0f) continue;
      const uint8_t* row = job.source + static_cast<long>(first_y + ky) * job.pitch + first_x * 3;
      float h[3] = {0, 0, 0};
      for (int kx = 0; kx < job.taps_across; ++kx) {
        const float v = wx[kx];
        if (v == 0.0f) continue;
        for (int c = 0; c < 3; ++c) h[c] = __fadd_rn(h[c], __fmul_rn(v, static_cast<float>(row[kx * 3 + c])));
      }
      for (int c = 0; c < 3; ++c) sum[c] = __fadd_rn(sum[c], __fmul_rn(w, h[c]));
    }
    for (int c = 0; c < 3; ++c) image[o * 3 + c] = to_byte(sum[c]);
  }
}

}  // namespace

long crop_resize_layout(CropResizeJob* jobs, int count, int out_height, int out_width) {
  long total = 0;
  for (int i = 0; i < count; ++i) {
    CropResizeJob& job = jobs[i];
    job.taps_across = resample_tap_bound(job.region_width, out_width);
    job.taps_down = resample_tap_bound(job.region_height, out_height);
    job.taps_offset = total;
    total += static_cast<long>(out_width) * (1 + job.taps_across) + static_cast<long>(out_height) * (1 + job.taps_down);
  }
  return total;
}

void crop_resize_images(cudaStream_t stream, const CropResizeJob* jobs, int count, int out_height, int out_width,
                        float* taps, uint8_t* out) {
  if (count == 0) return;
  DTRAIN_CHECK(out_height > 0 && out_width > 0) << "crop_resize_images: output " << out_height << "x" << out_width;
  constexpr int kThreads = 256;
  taps_kernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(jobs, out_height, out_width, taps);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "crop_resize_images' filters for " << count << " images";
  const int blocks = (out_height * out_width + kThreads - 1) / kThreads;
  resize_kernel<<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(count)), kThreads, 0, stream>>>(
      jobs, out_height, out_width, taps, out);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "crop_resize_images of " << count << " images";
}

}  // namespace dtrain::train::cuda
