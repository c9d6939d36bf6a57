#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "bench/fusion/norm_conv_kernels.h"
#include "runtime/cuda/cuda_check.h"

namespace dtrain::bench::fusion {
namespace {

constexpr int kLanes = 8;              // elements per 16-byte access
constexpr int kThreads = 256;          // per block
constexpr int kTargetBlocks = 528;     // 4 per SM of an H100 / H200: enough to fill the device
constexpr int kMaxChannelGroups = 32;  // channel groups of 8 per block row: 512 bytes of a pixel per warp

__device__ float widen(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ float widen(__half v) {
  return __half2float(v);
}
template <typename T>
__device__ T narrow(float v);
template <>
__device__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __half narrow<__half>(float v) {
  return __float2half_rn(v);
}

template <typename T>
struct alignas(16) Pack {
  T v[kLanes];
};

template <typename T>
__global__ void scale_bias_relu_kernel(const Pack<T>* x, const Pack<T>* scale, const Pack<T>* bias, Pack<T>* y,
                                       int64_t packs, int channel_packs) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < packs; i += int64_t{gridDim.x} * blockDim.x) {
    const int group = static_cast<int>(i % channel_packs);
    const Pack<T> in = x[i], s = scale[group], b = bias[group];
    Pack<T> out;
#pragma unroll
    for (int j = 0; j < kLanes; ++j)
      out.v[j] = narrow<T>(fmaxf(fmaf(widen(in.v[j]), widen(s.v[j]), widen(b.v[j])), 0.0f));
    y[i] = out;
  }
}

// Block (gx, gy): thread x owns channel group blockIdx.y * gx + x, thread y a stride of rows.
// Partials: row block b writes sums at [b * 2C, b * 2C + C) and squares after them.
template <typename T>
__global__ void partial_sums_kernel(const Pack<T>* y, int64_t rows, int channel_packs, float* partials) {
  extern __shared__ float shared[];  // [2][gy][gx * kLanes]
  const int gx = blockDim.x, gy = blockDim.y;
  const int group = blockIdx.y * gx + threadIdx.x;
  float s[kLanes] = {}, q[kLanes] = {};
  if (group < channel_packs) {
    for (int64_t r = blockIdx.x * int64_t{gy} + threadIdx.y; r < rows; r += int64_t{gridDim.x} * gy) {
      const Pack<T> in = y[r * channel_packs + group];
#pragma unroll
      for (int j = 0; j < kLanes; ++j) {
        const float v = widen(in.v[j]);
        s[j] += v;
        q[j] = fmaf(v, v, q[j]);
      }
    }
  }
  float* sums = shared + (threadIdx.y * gx + threadIdx.x) * kLanes;
  float* squares = sums + gy * gx * kLanes;
#pragma unroll
  for (int j = 0; j < kLanes; ++j) sums[j] = s[j], squares[j] = q[j];
  __syncthreads();
  if (threadIdx.y != 0 || group >= channel_packs) return;
  for (int row = 1; row < gy; ++row) {
#pragma unroll
    for (int j = 0; j < kLanes; ++j) s[j] += sums[row * gx * kLanes + j], q[j] += squares[row * gx * kLanes + j];
  }
  const int channels = channel_packs * kLanes;
  float* out = partials + int64_t{blockIdx.x} * 2 * channels + group * kLanes;
#pragma unroll
  for (int j = 0; j < kLanes; ++j) out[j] = s[j], out[channels + j] = q[j];
}

__global__ void finish_sums_kernel(const float* partials, int row_blocks, int channels, float* sum, float* sqsum) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  double s = 0, q = 0;
  for (int b = 0; b < row_blocks; ++b) {
    s += partials[int64_t{b} * 2 * channels + c];
    q += partials[int64_t{b} * 2 * channels + channels + c];
  }
  sum[c] = static_cast<float>(s);
  sqsum[c] = static_cast<float>(q);
}

__device__ uint64_t mix(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_kernel(T* data, int64_t count, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const float unit = static_cast<float>(mix(seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1)) >> 40) *
                       (1.0f / 16777216.0f);
    data[i] = narrow<T>(lo + (hi - lo) * unit);
  }
}

struct SumsGrid {
  dim3 block;
  dim3 grid;
  int row_blocks = 1;
};

SumsGrid sums_grid(int64_t rows, int channels) {
  const int packs = channels / kLanes;
  SumsGrid g;
  const int gx = std::min(packs, kMaxChannelGroups), gy = kThreads / gx;
  const int channel_tiles = (packs + gx - 1) / gx;
  const int64_t wanted = std::max(1, kTargetBlocks / channel_tiles);
  g.row_blocks = static_cast<int>(std::clamp<int64_t>((rows + gy - 1) / gy, 1, wanted));
  g.block = dim3(gx, gy);
  g.grid = dim3(g.row_blocks, channel_tiles);
  return g;
}

int elementwise_blocks(int64_t items) {
  return static_cast<int>(std::clamp<int64_t>((items + kThreads - 1) / kThreads, 1, 16 * kTargetBlocks));
}

void check_channels(int channels) {
  DTRAIN_CHECK(channels > 0 && channels % kLanes == 0)
      << channels << " channels: the probe's kernels want a positive multiple of " << kLanes;
}

template <typename T>
void launch_apply(cudaStream_t stream, const void* x, const void* scale, const void* bias, void* y, int64_t rows,
                  int channels) {
  const int64_t packs = rows * channels / kLanes;
  scale_bias_relu_kernel<T><<<elementwise_blocks(packs), kThreads, 0, stream>>>(
      static_cast<const Pack<T>*>(x), static_cast<const Pack<T>*>(scale), static_cast<const Pack<T>*>(bias),
      static_cast<Pack<T>*>(y), packs, channels / kLanes);
}

template <typename T>
void launch_sums(cudaStream_t stream, const void* y, int64_t rows, int channels, float* partials) {
  const SumsGrid g = sums_grid(rows, channels);
  const size_t shared = 2 * sizeof(float) * g.block.x * g.block.y * kLanes;
  partial_sums_kernel<T>
      <<<g.grid, g.block, shared, stream>>>(static_cast<const Pack<T>*>(y), rows, channels / kLanes, partials);
}

}  // namespace

void scale_bias_relu(cudaStream_t stream, Element element, const void* x, const void* scale, const void* bias, void* y,
                     int64_t rows, int channels) {
  check_channels(channels);
  if (element == Element::kBf16)
    launch_apply<__nv_bfloat16>(stream, x, scale, bias, y, rows, channels);
  else
    launch_apply<__half>(stream, x, scale, bias, y, rows, channels);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "launching the scale-bias-ReLU kernel";
}

size_t channel_sums_scratch_floats(int64_t rows, int channels) {
  return static_cast<size_t>(sums_grid(rows, channels).row_blocks) * 2 * static_cast<size_t>(channels);
}

void channel_sums(cudaStream_t stream, Element element, const void* y, int64_t rows, int channels, float* partials,
                  float* sum, float* sqsum) {
  check_channels(channels);
  if (element == Element::kBf16)
    launch_sums<__nv_bfloat16>(stream, y, rows, channels, partials);
  else
    launch_sums<__half>(stream, y, rows, channels, partials);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "launching the partial-sums kernel";
  const int row_blocks = sums_grid(rows, channels).row_blocks;
  finish_sums_kernel<<<(channels + kThreads - 1) / kThreads, kThreads, 0, stream>>>(partials, row_blocks, channels, sum,
                                                                                    sqsum);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "launching the sums kernel";
}

void fill_uniform(cudaStream_t stream, Element element, void* data, int64_t count, uint64_t seed, float lo, float hi) {
  if (element == Element::kBf16)
    fill_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, seed, lo,
                                                                    hi);
  else
    fill_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(static_cast<__half*>(data), count, seed, lo, hi);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "launching the fill kernel";
}

}  // namespace dtrain::bench::fusion
