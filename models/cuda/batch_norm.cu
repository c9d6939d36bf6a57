#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "models/cuda/batch_norm.h"
#include "models/cuda/moments.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_elements.cuh"
#include "runtime/cuda/resident_grid.h"
#include "runtime/memory/buffer.h"

namespace dtrain::models::cuda {
namespace {

using runtime::cuda::aligned16;
using runtime::cuda::DeviceTypeOf;
using runtime::cuda::kernel_address;
using runtime::cuda::load;
using runtime::cuda::one_wave_grid;
using runtime::cuda::resident_blocks;
using runtime::cuda::store;

// Rows are the (n, h, w) positions: M = batch * spatial of them per channel. Element (row, c):
// NHWC: row * C + c. NCHW: (n * C + c) * S + s with n = row / S, s = row % S. The divisions are
// 32-bit where the tensor's element count fits (a 64-bit division is a long software sequence, and
// the fp32 NCHW kernels did one or two per element).
struct Indexer {
  int channels;
  int64_t spatial;
  bool channels_last;
  bool fits_32_bits;  // every element index < 2^32
  __device__ int64_t operator()(int64_t row, int c) const {
    if (channels_last) return row * channels + c;
    if (fits_32_bits) {
      const uint32_t r = static_cast<uint32_t>(row), s = static_cast<uint32_t>(spatial);
      return (int64_t{r / s} * channels + c) * spatial + r % s;
    }
    return (row / spatial * channels + c) * spatial + row % spatial;
  }
  __device__ int channel_of(int64_t i) const {
    if (fits_32_bits) {
      const uint32_t u = static_cast<uint32_t>(i);
      return static_cast<int>(channels_last ? u % static_cast<uint32_t>(channels)
                                            : u / static_cast<uint32_t>(spatial) % static_cast<uint32_t>(channels));
    }
    return channels_last ? static_cast<int>(i % channels) : static_cast<int>(i / spatial % channels);
  }
};
// Whether every element index of the tensor fits 32 bits (the 32-bit index math's condition).
bool fits_32_bits(const BatchNormDims& d) {
  return int64_t{d.batch} * d.spatial * d.channels <= int64_t{UINT32_MAX};
}
Indexer indexer(const BatchNormDims& d) {
  return {d.channels, d.spatial, d.channels_last, fits_32_bits(d)};
}

// The launch of a per-channel reduction over the rows. Block shape: 32 channels x 8 row-lanes for
// NHWC (the 32 threads of a warp read 32 adjacent channels), 1 channel x 256 row-lanes for NCHW
// (adjacent rows are adjacent). Row blocks: as many as fill the GPU in one wave (resident_blocks of
// the kernel), each thread with at least 16 rows.
constexpr int kThreads = 256;
struct ReductionLaunch {
  Indexer ix;
  int64_t rows;
  int channels_per_block;
  int row_blocks;
  dim3 grid() const { return dim3((ix.channels + channels_per_block - 1) / channels_per_block, row_blocks); }
};
ReductionLaunch reduction_launch(const BatchNormDims& d, const void* kernel) {
  ReductionLaunch launch{indexer(d), int64_t{d.batch} * d.spatial, d.channels_last ? 32 : 1, 1};
  const int row_lanes = kThreads / launch.channels_per_block;
  const int channel_blocks = static_cast<int>(launch.grid().x);
  const int64_t want = std::max<int64_t>(1, resident_blocks(kernel, kThreads) / channel_blocks);
  launch.row_blocks = static_cast<int>(std::clamp<int64_t>(launch.rows / (row_lanes * 16), 1, want));
  return launch;
}

// Per (row block, channel): the moments of that block's rows, by Welford per thread, then Chan's
// merge across the block's row lanes. partials[row_block * C + c].
template <typename T>
__global__ void partial_moments_kernel(Indexer ix, int64_t rows, int channels_per_block, const T* __restrict__ x,
                                       Moments* __restrict__ partials) {
  const int lane_c = threadIdx.x % channels_per_block;
  const int lane_r = threadIdx.x / channels_per_block;
  const int lanes = blockDim.x / channels_per_block;
  const int c = blockIdx.x * channels_per_block + lane_c;
  Moments m{0, 0, 0};
  if (c < ix.channels) {
    for (int64_t r = blockIdx.y * int64_t{lanes} + lane_r; r < rows; r += int64_t{gridDim.y} * lanes) {
      add_value(m, load(x, ix(r, c)));
    }
  }
  __shared__ Moments shared[kThreads];
  shared[threadIdx.x] = m;
  __syncthreads();
  for (int stride = lanes / 2; stride > 0; stride /= 2) {
    if (lane_r < stride) {
      shared[threadIdx.x] = merge(shared[threadIdx.x], shared[threadIdx.x + stride * channels_per_block]);
    }
    __syncthreads();
  }
  if (lane_r == 0 && c < ix.channels) partials[blockIdx.y * int64_t{ix.channels} + c] = shared[threadIdx.x];
}

// The finalize kernels: a block is 32 channels x 32 lanes; each lane merges every 32nd row block's
// partials in double, then the 32 lanes merge in a fixed tree (deterministic). (With 8 lanes, the
// serial merges of a 64-channel layer's ~500 row blocks made each finalize ~7 us, 1.2 ms a step:
// bench/results/2026-11-24_h100/kernel_profile.)
constexpr int kFinalizeChannels = 32, kFinalizeLanes = 32;

struct MomentsD {
  double n, mean, m2;
};
__device__ inline MomentsD merge(MomentsD a, MomentsD b) {
  const double n = a.n + b.n;
  if (b.n == 0) return a;
  if (a.n == 0) return b;
  const double delta = b.mean - a.mean;
  return {n, a.mean + delta * b.n / n, a.m2 + b.m2 + delta * delta * a.n * b.n / n};
}

// Channel c's statistics from its moments over n values: saved mean and inverse std, running
// statistics, and the affine form of the normalization, y = x * scale + shift.
__device__ void write_statistics(int c, double n, double mean, double m2, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, double eps, double momentum,
                                 float* __restrict__ saved_mean, float* __restrict__ saved_inv_std,
                                 float* __restrict__ running_mean, float* __restrict__ running_var,
                                 float* __restrict__ scale, float* __restrict__ shift) {
  const double var = m2 / n;
  const double inv_std = 1.0 / sqrt(var + eps);
  saved_mean[c] = static_cast<float>(mean);
  saved_inv_std[c] = static_cast<float>(inv_std);
  const double unbiased = n > 1 ? m2 / (n - 1) : var;
  running_mean[c] = static_cast<float>((1 - momentum) * running_mean[c] + momentum * mean);
  running_var[c] = static_cast<float>((1 - momentum) * running_var[c] + momentum * unbiased);
  scale[c] = static_cast<float>(gamma[c] * inv_std);
  shift[c] = static_cast<float>(beta[c] - mean * gamma[c] * inv_std);
}

// Merges the partials, then write_statistics. With `local` (synchronized BN) it stops at the
// merged moments instead: local[c] = mean, local[C + c] = M2, for the exchange over the group.
__global__ void __launch_bounds__(kFinalizeChannels* kFinalizeLanes)
    finalize_forward_kernel(int channels, int row_blocks, const Moments* __restrict__ partials,
                            const float* __restrict__ gamma, const float* __restrict__ beta, double eps,
                            double momentum, float* __restrict__ saved_mean, float* __restrict__ saved_inv_std,
                            float* __restrict__ running_mean, float* __restrict__ running_var,
                            float* __restrict__ scale, float* __restrict__ shift, double* __restrict__ local) {
  const int lane_c = threadIdx.x % kFinalizeChannels, lane_r = threadIdx.x / kFinalizeChannels;
  const int c = blockIdx.x * kFinalizeChannels + lane_c;
  MomentsD m{0, 0, 0};
  if (c < channels) {
    for (int b = lane_r; b < row_blocks; b += kFinalizeLanes) {
      const Moments p = partials[int64_t{b} * channels + c];
      m = merge(m, MomentsD{static_cast<double>(p.n), p.mean, p.m2});
    }
  }
  __shared__ MomentsD shared[kFinalizeChannels * kFinalizeLanes];
  shared[threadIdx.x] = m;
  __syncthreads();
  for (int stride = kFinalizeLanes / 2; stride > 0; stride /= 2) {
    if (lane_r < stride)
      shared[threadIdx.x] = merge(shared[threadIdx.x], shared[threadIdx.x + stride * kFinalizeChannels]);
    __syncthreads();
  }
  if (lane_r != 0 || c >= channels) return;
  const MomentsD merged = shared[threadIdx.x];
  if (local != nullptr) {
    local[c] = merged.mean;
    local[channels + c] = merged.m2;
    return;
  }
  write_statistics(c, merged.n, merged.mean, merged.m2, gamma, beta, eps, momentum, saved_mean, saved_inv_std,
                   running_mean, running_var, scale, shift);
}

// Synchronized BN: write_statistics from the group's moments over n values, group[c] = mean,
// group[C + c] = M2.
__global__ void group_statistics_kernel(int channels, double n, const double* __restrict__ group,
                                        const float* __restrict__ gamma, const float* __restrict__ beta, double eps,
                                        double momentum, float* __restrict__ saved_mean,
                                        float* __restrict__ saved_inv_std, float* __restrict__ running_mean,
                                        float* __restrict__ running_var, float* __restrict__ scale,
                                        float* __restrict__ shift) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  write_statistics(c, n, group[c], group[channels + c], gamma, beta, eps, momentum, saved_mean, saved_inv_std,
                   running_mean, running_var, scale, shift);
}

__global__ void eval_coefficients_kernel(int channels, const float* __restrict__ gamma, const float* __restrict__ beta,
                                         const float* __restrict__ running_mean, const float* __restrict__ running_var,
                                         double eps, float* __restrict__ scale, float* __restrict__ shift) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const double inv_std = 1.0 / sqrt(static_cast<double>(running_var[c]) + eps);
  scale[c] = static_cast<float>(gamma[c] * inv_std);
  shift[c] = static_cast<float>(beta[c] - running_mean[c] * gamma[c] * inv_std);
}

// Bit i of the ReLU mask (element i in memory order: byte i / 8, bit i % 8) says whether y_i > 0
// before rounding. Backward reads it instead of y: 1 bit per element instead of 16 or 32. (It
// differs from y > 0 only where the value v before rounding has 0 < v <= 2^-134, half bf16's
// smallest subnormal: y rounds to 0 and the mask still passes the gradient, far below bf16's
// resolution.)
__device__ inline bool relu_mask_bit(const uint8_t* __restrict__ mask, int64_t i) {
  return (mask[i >> 3] >> (i & 7)) & 1;
}

// Each warp walks 32 consecutive elements at a time (blocks of 256 threads: a warp's first element
// is a multiple of 32), so a ballot gives the warp's 32 mask bits as one 32-bit word.
template <typename T>
__global__ void apply_kernel(Indexer ix, int64_t n, const T* __restrict__ x, const float* __restrict__ scale,
                             const float* __restrict__ shift, const T* __restrict__ residual, bool relu,
                             T* __restrict__ y, uint32_t* __restrict__ relu_mask) {
  const int lane = threadIdx.x % 32;
  for (int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x - lane; first < n;
       first += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = first + lane;
    float v = 0.0f;
    if (i < n) {
      const int c = ix.channel_of(i);
      v = load(x, i) * scale[c] + shift[c];
      if (residual != nullptr) v += load(residual, i);
      store(y, i, relu ? fmaxf(v, 0.0f) : v);
    }
    if (relu_mask != nullptr) {
      const uint32_t bits = __ballot_sync(0xffffffffu, i < n && v > 0.0f);
      if (lane == 0) relu_mask[first / 32] = bits;
    }
  }
}

// Backward partials per (row block, channel): sum of dy' and of dy' * xhat, dy' = dy through the
// ReLU mask.
template <typename T>
__global__ void backward_partials_kernel(Indexer ix, int64_t rows, int channels_per_block, const T* __restrict__ x,
                                         const uint8_t* __restrict__ relu_mask, const T* __restrict__ dy, bool relu,
                                         const float* __restrict__ mean, const float* __restrict__ inv_std,
                                         float2* __restrict__ partials) {
  const int lane_c = threadIdx.x % channels_per_block;
  const int lane_r = threadIdx.x / channels_per_block;
  const int lanes = blockDim.x / channels_per_block;
  const int c = blockIdx.x * channels_per_block + lane_c;
  float sum_dy = 0, sum_dy_xhat = 0;
  if (c < ix.channels) {
    const float mu = mean[c], is = inv_std[c];
    for (int64_t r = blockIdx.y * int64_t{lanes} + lane_r; r < rows; r += int64_t{gridDim.y} * lanes) {
      const int64_t i = ix(r, c);
      float g = load(dy, i);
      if (relu && !relu_mask_bit(relu_mask, i)) g = 0.0f;
      sum_dy += g;
      sum_dy_xhat += g * (load(x, i) - mu) * is;
    }
  }
  __shared__ float2 shared[kThreads];
  shared[threadIdx.x] = make_float2(sum_dy, sum_dy_xhat);
  __syncthreads();
  for (int stride = lanes / 2; stride > 0; stride /= 2) {
    if (lane_r < stride) {
      const float2 other = shared[threadIdx.x + stride * channels_per_block];
      shared[threadIdx.x].x += other.x;
      shared[threadIdx.x].y += other.y;
    }
    __syncthreads();
  }
  if (lane_r == 0 && c < ix.channels) partials[blockIdx.y * int64_t{ix.channels} + c] = shared[threadIdx.x];
}

// dgamma = sum(dy' * xhat), dbeta = sum(dy') of this rank's rows; dx = k * (dy' - (S + xhat * X) / M)
// with k = gamma * inv_std and S, X, M the sums and the row count of the rows normalized together
// (the group's under synchronized BN, else this rank's), written as dx = dy' * k - (a + xhat * b)
// with a, b per channel. coefficients: k[C], then a[C], then b[C].
__device__ void write_backward(int c, int channels, double local_dy, double local_dy_xhat, double sum_dy,
                               double sum_dy_xhat, double rows, const float* __restrict__ gamma,
                               const float* __restrict__ inv_std, float* __restrict__ dgamma, float* __restrict__ dbeta,
                               float* __restrict__ coefficients) {
  dgamma[c] = static_cast<float>(local_dy_xhat);
  dbeta[c] = static_cast<float>(local_dy);
  const double k = static_cast<double>(gamma[c]) * inv_std[c];
  coefficients[c] = static_cast<float>(k);
  coefficients[channels + c] = static_cast<float>(k * sum_dy / rows);
  coefficients[2 * channels + c] = static_cast<float>(k * sum_dy_xhat / rows);
}

// Adds the partials, then write_backward. With `local` (synchronized BN) it stops at the sums
// instead: local[c] = sum(dy'), local[C + c] = sum(dy' * xhat), for the exchange over the group.
__global__ void __launch_bounds__(kFinalizeChannels* kFinalizeLanes)
    finalize_backward_kernel(int channels, int row_blocks, double rows, const float2* __restrict__ partials,
                             const float* __restrict__ gamma, const float* __restrict__ inv_std,
                             float* __restrict__ dgamma, float* __restrict__ dbeta, float* __restrict__ coefficients,
                             double* __restrict__ local) {
  const int lane_c = threadIdx.x % kFinalizeChannels, lane_r = threadIdx.x / kFinalizeChannels;
  const int c = blockIdx.x * kFinalizeChannels + lane_c;
  double sum_dy = 0, sum_dy_xhat = 0;
  if (c < channels) {
    for (int b = lane_r; b < row_blocks; b += kFinalizeLanes) {
      sum_dy += partials[int64_t{b} * channels + c].x;
      sum_dy_xhat += partials[int64_t{b} * channels + c].y;
    }
  }
  __shared__ double2 shared[kFinalizeChannels * kFinalizeLanes];
  shared[threadIdx.x] = make_double2(sum_dy, sum_dy_xhat);
  __syncthreads();
  for (int stride = kFinalizeLanes / 2; stride > 0; stride /= 2) {
    if (lane_r < stride) {
      shared[threadIdx.x].x += shared[threadIdx.x + stride * kFinalizeChannels].x;
      shared[threadIdx.x].y += shared[threadIdx.x + stride * kFinalizeChannels].y;
    }
    __syncthreads();
  }
  if (lane_r != 0 || c >= channels) return;
  sum_dy = shared[threadIdx.x].x;
  sum_dy_xhat = shared[threadIdx.x].y;
  if (local != nullptr) {
    local[c] = sum_dy;
    local[channels + c] = sum_dy_xhat;
    return;
  }
  write_backward(c, channels, sum_dy, sum_dy_xhat, sum_dy, sum_dy_xhat, rows, gamma, inv_std, dgamma, dbeta,
                 coefficients);
}

// Synchronized BN: write_backward from sums[4C] = this rank's sum(dy') and sum(dy' * xhat), then
// the group's, over the group's rows.
__global__ void group_backward_kernel(int channels, double rows, const double* __restrict__ sums,
                                      const float* __restrict__ gamma, const float* __restrict__ inv_std,
                                      float* __restrict__ dgamma, float* __restrict__ dbeta,
                                      float* __restrict__ coefficients) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  write_backward(c, channels, sums[c], sums[channels + c], sums[2 * channels + c], sums[3 * channels + c], rows, gamma,
                 inv_std, dgamma, dbeta, coefficients);
}

template <typename T>
__global__ void backward_apply_kernel(Indexer ix, int64_t n, const T* __restrict__ x,
                                      const uint8_t* __restrict__ relu_mask, const T* __restrict__ dy, bool relu,
                                      const float* __restrict__ mean, const float* __restrict__ inv_std,
                                      const float* __restrict__ coefficients, T* __restrict__ dx,
                                      T* __restrict__ dresidual) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int c = ix.channel_of(i);
    float g = load(dy, i);
    if (relu && !relu_mask_bit(relu_mask, i)) g = 0.0f;
    if (dresidual != nullptr) store(dresidual, i, g);
    const float xhat = (load(x, i) - mean[c]) * inv_std[c];
    store(dx, i, g * coefficients[c] - coefficients[ix.channels + c] - xhat * coefficients[2 * ix.channels + c]);
  }
}

// --- The bf16 NHWC fast path: 8 channels (16 bytes) per thread and load ---------------------
// Taken when C is a multiple of 8 and every tensor is 16-byte aligned (always, for tensors from
// the caching allocator); the same math as the kernels above, a vector at a time.
constexpr int kVec = 8;

static_assert(kVec == runtime::cuda::kBf16x8, "the BN vector path moves 8 bf16 channels a load");

__device__ inline void load8(const __nv_bfloat16* p, int64_t i, float out[kVec]) {
  runtime::cuda::load_bf16x8(p + i, out);
}

__device__ inline void store8(__nv_bfloat16* p, int64_t i, const float in[kVec]) {
  runtime::cuda::store_bf16x8(p + i, in);
}

__device__ inline void load8(const float* p, int c, float out[kVec]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p + c)), b = __ldg(reinterpret_cast<const float4*>(p + c) + 1);
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

// Block: `groups` 8-channel groups x (256 / groups) row lanes; groups is a power of two. Row
// blocks: one wave of the kernel, each thread with at least 8 rows.
struct VecLaunch {
  int channels;
  int64_t rows;
  int groups;
  int row_blocks;
  dim3 grid() const { return dim3((channels / kVec + groups - 1) / groups, row_blocks); }
};
VecLaunch vec_launch(const BatchNormDims& d, const void* kernel) {
  VecLaunch launch{d.channels, int64_t{d.batch} * d.spatial, 1, 1};
  while (launch.groups * 2 <= std::min(d.channels / kVec, 32)) launch.groups *= 2;
  const int lanes = kThreads / launch.groups;
  const int64_t want = std::max<int64_t>(1, resident_blocks(kernel, kThreads) / launch.grid().x);
  launch.row_blocks = static_cast<int>(std::clamp<int64_t>(launch.rows / (lanes * 8), 1, want));
  return launch;
}

__global__ void partial_moments_vec_kernel(int channels, int64_t rows, int groups, const __nv_bfloat16* __restrict__ x,
                                           Moments* __restrict__ partials) {
  const int lane_g = threadIdx.x % groups, lane_r = threadIdx.x / groups, lanes = blockDim.x / groups;
  const int c0 = (blockIdx.x * groups + lane_g) * kVec;
  int64_t n = 0;
  float mean[kVec] = {}, m2[kVec] = {};
  if (c0 < channels) {
    for (int64_t r = blockIdx.y * int64_t{lanes} + lane_r; r < rows; r += int64_t{gridDim.y} * lanes) {
      float v[kVec];
      load8(x, r * channels + c0, v);
      n += 1;
      const float inv_n = 1.0f / static_cast<float>(n);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float delta = v[k] - mean[k];
        mean[k] += delta * inv_n;
        m2[k] += delta * (v[k] - mean[k]);
      }
    }
  }
  __shared__ int64_t shared_n[kThreads];
  __shared__ float shared_mean[kVec][kThreads], shared_m2[kVec][kThreads];
  shared_n[threadIdx.x] = n;
#pragma unroll
  for (int k = 0; k < kVec; ++k) shared_mean[k][threadIdx.x] = mean[k], shared_m2[k][threadIdx.x] = m2[k];
  __syncthreads();
  for (int stride = lanes / 2; stride > 0; stride /= 2) {
    if (lane_r < stride) {
      const int other = threadIdx.x + stride * groups;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const Moments m = merge(Moments{shared_n[threadIdx.x], shared_mean[k][threadIdx.x], shared_m2[k][threadIdx.x]},
                                Moments{shared_n[other], shared_mean[k][other], shared_m2[k][other]});
        shared_mean[k][threadIdx.x] = m.mean;
        shared_m2[k][threadIdx.x] = m.m2;
      }
      shared_n[threadIdx.x] += shared_n[other];
    }
    __syncthreads();
  }
  if (lane_r != 0 || c0 >= channels) return;
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    partials[blockIdx.y * int64_t{channels} + c0 + k] =
        Moments{shared_n[threadIdx.x], shared_mean[k][threadIdx.x], shared_m2[k][threadIdx.x]};
  }
}

// A grid-stride loop's first 8-channel group and its step between iterations, so that the loop
// divides nothing. (Keeping the coefficients in registers while the group stays the same, as it
// does for a one-wave grid and C a power of two, was slower: more registers, fewer blocks per SM;
// bench/results/2026-11-25_h200/bn_waves.)
struct ChannelWalk {
  int c0, step;
};
__device__ inline ChannelWalk channel_walk(int channels) {
  const int64_t first = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * kVec;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x * kVec;
  return {static_cast<int>(first % channels), static_cast<int>(stride % channels)};
}
__device__ inline void advance(ChannelWalk& walk, int channels) {
  walk.c0 += walk.step;
  if (walk.c0 >= channels) walk.c0 -= channels;
}

__global__ void apply_vec_kernel(int channels, int64_t vectors, const __nv_bfloat16* __restrict__ x,
                                 const float* __restrict__ scale, const float* __restrict__ shift,
                                 const __nv_bfloat16* __restrict__ residual, bool relu, __nv_bfloat16* __restrict__ y,
                                 uint8_t* __restrict__ relu_mask) {
  ChannelWalk walk = channel_walk(channels);
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < vectors;
       v += int64_t{gridDim.x} * blockDim.x, advance(walk, channels)) {
    const int64_t i = v * kVec;
    const int c0 = walk.c0;
    float xs[kVec], a[kVec], b[kVec], r[kVec] = {};
    load8(x, i, xs);
    load8(scale, c0, a);
    load8(shift, c0, b);
    if (residual != nullptr) load8(residual, i, r);
    uint32_t bits = 0;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float out = fmaf(xs[k], a[k], b[k]) + r[k];
      bits |= uint32_t{out > 0.0f} << k;
      xs[k] = relu ? fmaxf(out, 0.0f) : out;
    }
    store8(y, i, xs);
    if (relu_mask != nullptr) relu_mask[v] = static_cast<uint8_t>(bits);
  }
}

// The ReLU mask of the 8 elements from i (a multiple of 8): one byte of the mask.
__device__ inline uint32_t relu_mask8(const uint8_t* __restrict__ mask, int64_t i) {
  return mask[i / kVec];
}

__global__ void backward_partials_vec_kernel(int channels, int64_t rows, int groups,
                                             const __nv_bfloat16* __restrict__ x, const uint8_t* __restrict__ relu_mask,
                                             const __nv_bfloat16* __restrict__ dy, bool relu,
                                             const float* __restrict__ mean, const float* __restrict__ inv_std,
                                             float2* __restrict__ partials) {
  const int lane_g = threadIdx.x % groups, lane_r = threadIdx.x / groups, lanes = blockDim.x / groups;
  const int c0 = (blockIdx.x * groups + lane_g) * kVec;
  float sum_dy[kVec] = {}, sum_dy_xhat[kVec] = {};
  if (c0 < channels) {
    float mu[kVec], is[kVec];
    load8(mean, c0, mu);
    load8(inv_std, c0, is);
    for (int64_t r = blockIdx.y * int64_t{lanes} + lane_r; r < rows; r += int64_t{gridDim.y} * lanes) {
      const int64_t i = r * channels + c0;
      float g[kVec], xs[kVec];
      load8(dy, i, g);
      load8(x, i, xs);
      const uint32_t keep = relu ? relu_mask8(relu_mask, i) : 0xffu;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float gk = (keep >> k) & 1 ? g[k] : 0.0f;
        sum_dy[k] += gk;
        sum_dy_xhat[k] += gk * (xs[k] - mu[k]) * is[k];
      }
    }
  }
  __shared__ float shared_dy[kVec][kThreads], shared_dy_xhat[kVec][kThreads];
#pragma unroll
  for (int k = 0; k < kVec; ++k) shared_dy[k][threadIdx.x] = sum_dy[k], shared_dy_xhat[k][threadIdx.x] = sum_dy_xhat[k];
  __syncthreads();
  for (int stride = lanes / 2; stride > 0; stride /= 2) {
    if (lane_r < stride) {
      const int other = threadIdx.x + stride * groups;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        shared_dy[k][threadIdx.x] += shared_dy[k][other];
        shared_dy_xhat[k][threadIdx.x] += shared_dy_xhat[k][other];
      }
    }
    __syncthreads();
  }
  if (lane_r != 0 || c0 >= channels) return;
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    partials[blockIdx.y * int64_t{channels} + c0 + k] =
        make_float2(shared_dy[k][threadIdx.x], shared_dy_xhat[k][threadIdx.x]);
  }
}

__global__ void backward_apply_vec_kernel(int channels, int64_t vectors, const __nv_bfloat16* __restrict__ x,
                                          const uint8_t* __restrict__ relu_mask, const __nv_bfloat16* __restrict__ dy,
                                          bool relu, const float* __restrict__ mean, const float* __restrict__ inv_std,
                                          const float* __restrict__ coefficients, __nv_bfloat16* __restrict__ dx,
                                          __nv_bfloat16* __restrict__ dresidual) {
  ChannelWalk walk = channel_walk(channels);
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < vectors;
       v += int64_t{gridDim.x} * blockDim.x, advance(walk, channels)) {
    const int64_t i = v * kVec;
    const int c0 = walk.c0;
    float g[kVec], xs[kVec], mu[kVec], is[kVec], k_[kVec], a[kVec], b[kVec];
    load8(dy, i, g);
    load8(x, i, xs);
    const uint32_t keep = relu ? relu_mask8(relu_mask, i) : 0xffu;
    load8(mean, c0, mu);
    load8(inv_std, c0, is);
    load8(coefficients, c0, k_);
    load8(coefficients + channels, c0, a);
    load8(coefficients + 2 * channels, c0, b);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      if (!((keep >> k) & 1)) g[k] = 0.0f;
    }
    if (dresidual != nullptr) store8(dresidual, i, g);
#pragma unroll
    for (int k = 0; k < kVec; ++k) xs[k] = g[k] * k_[k] - a[k] - (xs[k] - mu[k]) * is[k] * b[k];
    store8(dx, i, xs);
  }
}

#include "models/cuda/batch_norm_fp32_nchw.cuh"

// The fp32 NCHW quad path (batch_norm_fp32_nchw.cuh).
template <typename D>
bool quad_path(const BatchNormDims& d, std::initializer_list<const void*> pointers) {
  if constexpr (!std::is_same_v<D, float>) {
    return false;
  } else {
    return !d.channels_last && d.spatial % kQuad == 0 && fits_32_bits(d) && aligned16(pointers);
  }
}

template <typename D>
bool vector_path(const BatchNormDims& d, std::initializer_list<const void*> pointers) {
  if constexpr (!std::is_same_v<D, __nv_bfloat16>) {
    return false;
  } else {
    return d.channels_last && d.channels % kVec == 0 && aligned16(pointers);
  }
}

void check_dims(const BatchNormDims& d) {
  DTRAIN_CHECK(d.batch > 0 && d.channels > 0 && d.spatial > 0 && d.eps > 0)
      << "batch norm: bad dims N=" << d.batch << " C=" << d.channels << " HxW=" << d.spatial << " eps=" << d.eps;
}

// Synchronized BN's host round-trip, between two kernels of `stream`: `count` doubles at `device`
// to the host (the host waits for the stream), `exchange` on them, and `back` doubles of the result
// to `device`. Waits for that copy too: it reads pageable host memory that is gone on return.
template <typename Exchange>
void round_trip(cudaStream_t stream, double* device, size_t count, size_t back, Exchange exchange) {
  std::vector<double> host(std::max(count, back) + 1);
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(host.data(), device, count * sizeof(double), cudaMemcpyDeviceToHost, stream))
      << "synchronized batch norm: statistics to the host";
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream)) << "synchronized batch norm: the layer's statistics";
  exchange(host);
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(device, host.data(), back * sizeof(double), cudaMemcpyHostToDevice, stream))
      << "synchronized batch norm: the group's statistics to the device";
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream)) << "synchronized batch norm: the group's statistics";
}

}  // namespace

// Per-call scratch (partials, per-channel coefficients) is a device Buffer on `stream`: it comes
// from the caching allocator, and its reuse after release is ordered on the same stream.
template <typename T>
void batch_norm_forward_train(cudaStream_t stream, const BatchNormDims& d, const T* x_host_type, const float* gamma,
                              const float* beta, const T* residual_host_type, bool relu, T* y_host_type,
                              float* saved_mean, float* saved_inv_std, float* running_mean, float* running_var,
                              uint8_t* relu_mask, BatchStatsReducer* group) {
  using D = DeviceTypeOf<T>;
  check_dims(d);
  DTRAIN_CHECK(!relu || (relu_mask != nullptr && reinterpret_cast<uintptr_t>(relu_mask) % 4 == 0))
      << "batch norm forward with ReLU needs a 4-byte aligned mask of relu_mask_bytes(elements) bytes";
  const D* x = reinterpret_cast<const D*>(x_host_type);
  const bool vectorized = vector_path<D>(d, {x, residual_host_type, y_host_type});
  const bool quads = quad_path<D>(d, {x, residual_host_type, y_host_type});
  const int64_t rows = int64_t{d.batch} * d.spatial;
  const bool generic = !vectorized && !quads;
  const ReductionLaunch launch =
      generic ? reduction_launch(d, kernel_address(partial_moments_kernel<D>)) : ReductionLaunch{};
  const VecLaunch vec = vectorized ? vec_launch(d, kernel_address(partial_moments_vec_kernel)) : VecLaunch{};
  const QuadLaunch quad = quads ? quad_launch(d, kernel_address(partial_moments_quad_kernel)) : QuadLaunch{};
  const int row_blocks = vectorized ? vec.row_blocks : quads ? quad.row_blocks : launch.row_blocks;
  const bool sync = synchronizes(group);
  // Scale and shift first (16-byte aligned for the vector loads), then the partials, then (sync)
  // the exchanged moments (the 16-byte Moments keep them 8-byte aligned).
  const size_t coefficient_bytes = (2 * sizeof(float) * d.channels + 15) / 16 * 16;
  const size_t partial_bytes = sizeof(Moments) * size_t(row_blocks) * d.channels;
  const size_t exchanged = sync ? 2 * size_t(d.channels) : 0;
  runtime::Buffer scratch(runtime::MemoryKind::kDevice, coefficient_bytes + partial_bytes + sizeof(double) * exchanged,
                          stream);
  float* scale = static_cast<float*>(scratch.data());
  float* shift = scale + d.channels;
  Moments* partials = reinterpret_cast<Moments*>(static_cast<char*>(scratch.data()) + coefficient_bytes);
  double* moments =
      sync ? reinterpret_cast<double*>(static_cast<char*>(scratch.data()) + coefficient_bytes + partial_bytes)
           : nullptr;
  if (vectorized) {
    partial_moments_vec_kernel<<<vec.grid(), kThreads, 0, stream>>>(
        d.channels, vec.rows, vec.groups, reinterpret_cast<const __nv_bfloat16*>(x), partials);
  } else if (quads) {
    partial_moments_quad_kernel<<<quad.grid(), kThreads, 0, stream>>>(quad.ix, quad.quads,
                                                                      reinterpret_cast<const float*>(x), partials);
  } else {
    partial_moments_kernel<<<launch.grid(), kThreads, 0, stream>>>(launch.ix, launch.rows, launch.channels_per_block, x,
                                                                   partials);
  }
  finalize_forward_kernel<<<(d.channels + kFinalizeChannels - 1) / kFinalizeChannels,
                            kFinalizeChannels * kFinalizeLanes, 0, stream>>>(
      d.channels, row_blocks, partials, gamma, beta, d.eps, d.momentum, saved_mean, saved_inv_std, running_mean,
      running_var, scale, shift, moments);
  if (sync) {
    int64_t group_rows = 0;
    round_trip(stream, moments, exchanged, exchanged, [&](std::vector<double>& host) {
      group_rows = merge_moments_over_group(*group, d.channels, rows, host.data(), host.data() + d.channels);
    });
    group_statistics_kernel<<<(d.channels + 127) / 128, 128, 0, stream>>>(
        d.channels, static_cast<double>(group_rows), moments, gamma, beta, d.eps, d.momentum, saved_mean, saved_inv_std,
        running_mean, running_var, scale, shift);
  }
  const int64_t n = rows * d.channels;
  if (vectorized) {
    apply_vec_kernel<<<one_wave_grid(kernel_address(apply_vec_kernel), kThreads, n / kVec), kThreads, 0, stream>>>(
        d.channels, n / kVec, reinterpret_cast<const __nv_bfloat16*>(x), scale, shift,
        reinterpret_cast<const __nv_bfloat16*>(residual_host_type), relu, reinterpret_cast<__nv_bfloat16*>(y_host_type),
        relu ? relu_mask : nullptr);
  } else if (quads) {
    apply_quad_kernel<<<one_wave_grid(kernel_address(apply_quad_kernel), kThreads, n / kQuad), kThreads, 0, stream>>>(
        quad.ix, n / kQuad, reinterpret_cast<const float*>(x), scale, shift,
        reinterpret_cast<const float*>(residual_host_type), relu, reinterpret_cast<float*>(y_host_type),
        relu ? reinterpret_cast<uint32_t*>(relu_mask) : nullptr);
  } else {
    apply_kernel<D><<<one_wave_grid(kernel_address(apply_kernel<D>), kThreads, n), kThreads, 0, stream>>>(
        launch.ix, n, x, scale, shift, reinterpret_cast<const D*>(residual_host_type), relu,
        reinterpret_cast<D*>(y_host_type), relu ? reinterpret_cast<uint32_t*>(relu_mask) : nullptr);
  }
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm forward kernels";
}

template <typename T>
void batch_norm_forward_eval(cudaStream_t stream, const BatchNormDims& d, const T* x_host_type, const float* gamma,
                             const float* beta, const float* running_mean, const float* running_var,
                             const T* residual_host_type, bool relu, T* y_host_type) {
  using D = DeviceTypeOf<T>;
  check_dims(d);
  runtime::Buffer scratch(runtime::MemoryKind::kDevice, 2 * sizeof(float) * d.channels, stream);
  float* scale = static_cast<float*>(scratch.data());
  float* shift = scale + d.channels;
  eval_coefficients_kernel<<<(d.channels + 127) / 128, 128, 0, stream>>>(d.channels, gamma, beta, running_mean,
                                                                         running_var, d.eps, scale, shift);
  const int64_t n = int64_t{d.batch} * d.spatial * d.channels;
  if (vector_path<D>(d, {x_host_type, residual_host_type, y_host_type, shift})) {
    apply_vec_kernel<<<one_wave_grid(kernel_address(apply_vec_kernel), kThreads, n / kVec), kThreads, 0, stream>>>(
        d.channels, n / kVec, reinterpret_cast<const __nv_bfloat16*>(x_host_type), scale, shift,
        reinterpret_cast<const __nv_bfloat16*>(residual_host_type), relu, reinterpret_cast<__nv_bfloat16*>(y_host_type),
        nullptr);
    DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm eval kernels";
    return;
  }
  if (quad_path<D>(d, {x_host_type, residual_host_type, y_host_type})) {
    apply_quad_kernel<<<one_wave_grid(kernel_address(apply_quad_kernel), kThreads, n / kQuad), kThreads, 0, stream>>>(
        quad_indexer(d), n / kQuad, reinterpret_cast<const float*>(x_host_type), scale, shift,
        reinterpret_cast<const float*>(residual_host_type), relu, reinterpret_cast<float*>(y_host_type), nullptr);
    DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm eval kernels";
    return;
  }
  apply_kernel<D><<<one_wave_grid(kernel_address(apply_kernel<D>), kThreads, n), kThreads, 0, stream>>>(
      indexer(d), n, reinterpret_cast<const D*>(x_host_type), scale, shift,
      reinterpret_cast<const D*>(residual_host_type), relu, reinterpret_cast<D*>(y_host_type), nullptr);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm eval kernels";
}

template <typename T>
void batch_norm_backward(cudaStream_t stream, const BatchNormDims& d, const T* x_host_type, const uint8_t* relu_mask,
                         const T* dy_host_type, const float* gamma, const float* saved_mean, const float* saved_inv_std,
                         bool relu, T* dx_host_type, T* dresidual_host_type, float* dgamma, float* dbeta,
                         BatchStatsReducer* group) {
  using D = DeviceTypeOf<T>;
  check_dims(d);
  DTRAIN_CHECK(!relu || relu_mask != nullptr) << "batch norm backward with ReLU needs the forward's ReLU mask";
  const D* x = reinterpret_cast<const D*>(x_host_type);
  const D* dy = reinterpret_cast<const D*>(dy_host_type);
  const bool vectorized = vector_path<D>(d, {x, dy, dx_host_type, dresidual_host_type, saved_mean, saved_inv_std});
  const bool quads = quad_path<D>(d, {x, dy, dx_host_type, dresidual_host_type});
  const bool generic = !vectorized && !quads;
  const int64_t rows = int64_t{d.batch} * d.spatial;
  const ReductionLaunch launch =
      generic ? reduction_launch(d, kernel_address(backward_partials_kernel<D>)) : ReductionLaunch{};
  const VecLaunch vec = vectorized ? vec_launch(d, kernel_address(backward_partials_vec_kernel)) : VecLaunch{};
  const QuadLaunch quad = quads ? quad_launch(d, kernel_address(backward_partials_quad_kernel)) : QuadLaunch{};
  const int row_blocks = vectorized ? vec.row_blocks : quads ? quad.row_blocks : launch.row_blocks;
  const bool sync = synchronizes(group);
  // Coefficients first (16-byte aligned for the vector loads), then the partials, then (sync) the
  // exchanged sums: this rank's, then the group's.
  const size_t coefficient_bytes = (3 * sizeof(float) * d.channels + 15) / 16 * 16;
  const size_t partial_bytes = sizeof(float2) * size_t(row_blocks) * d.channels;
  const size_t local = sync ? 2 * size_t(d.channels) : 0;
  runtime::Buffer scratch(runtime::MemoryKind::kDevice, coefficient_bytes + partial_bytes + sizeof(double) * 2 * local,
                          stream);
  float* coefficients = static_cast<float*>(scratch.data());
  float2* partials = reinterpret_cast<float2*>(static_cast<char*>(scratch.data()) + coefficient_bytes);
  double* sums = sync
                     ? reinterpret_cast<double*>(static_cast<char*>(scratch.data()) + coefficient_bytes + partial_bytes)
                     : nullptr;
  if (vectorized) {
    backward_partials_vec_kernel<<<vec.grid(), kThreads, 0, stream>>>(
        d.channels, vec.rows, vec.groups, reinterpret_cast<const __nv_bfloat16*>(x), relu_mask,
        reinterpret_cast<const __nv_bfloat16*>(dy), relu, saved_mean, saved_inv_std, partials);
  } else if (quads) {
    backward_partials_quad_kernel<<<quad.grid(), kThreads, 0, stream>>>(
        quad.ix, quad.quads, reinterpret_cast<const float*>(x), relu_mask, reinterpret_cast<const float*>(dy), relu,
        saved_mean, saved_inv_std, partials);
  } else {
    backward_partials_kernel<<<launch.grid(), kThreads, 0, stream>>>(
        launch.ix, launch.rows, launch.channels_per_block, x, relu_mask, dy, relu, saved_mean, saved_inv_std, partials);
  }
  finalize_backward_kernel<<<(d.channels + kFinalizeChannels - 1) / kFinalizeChannels,
                             kFinalizeChannels * kFinalizeLanes, 0, stream>>>(
      d.channels, row_blocks, static_cast<double>(rows), partials, gamma, saved_inv_std, dgamma, dbeta, coefficients,
      sums);
  if (sync) {
    double group_rows = 0;
    round_trip(stream, sums, local, 2 * local, [&](std::vector<double>& host) {
      // [sum(dy') | sum(dy' * xhat) | rows] added over the group, after this rank's own sums.
      std::vector<double> group_sums(host.begin(), host.begin() + static_cast<long>(local));
      group_sums.push_back(static_cast<double>(rows));
      sum_over_group(*group, group_sums.data(), group_sums.size());
      std::copy(group_sums.begin(), group_sums.begin() + static_cast<long>(local),
                host.begin() + static_cast<long>(local));
      group_rows = group_sums.back();
    });
    group_backward_kernel<<<(d.channels + 127) / 128, 128, 0, stream>>>(d.channels, group_rows, sums, gamma,
                                                                        saved_inv_std, dgamma, dbeta, coefficients);
  }
  const int64_t n = rows * d.channels;
  if (vectorized) {
    backward_apply_vec_kernel<<<one_wave_grid(kernel_address(backward_apply_vec_kernel), kThreads, n / kVec), kThreads,
                                0, stream>>>(
        d.channels, n / kVec, reinterpret_cast<const __nv_bfloat16*>(x), relu_mask,
        reinterpret_cast<const __nv_bfloat16*>(dy), relu, saved_mean, saved_inv_std, coefficients,
        reinterpret_cast<__nv_bfloat16*>(dx_host_type), reinterpret_cast<__nv_bfloat16*>(dresidual_host_type));
    DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm backward kernels";
    return;
  }
  if (quads) {
    backward_apply_quad_kernel<<<one_wave_grid(kernel_address(backward_apply_quad_kernel), kThreads, n / kQuad),
                                 kThreads, 0, stream>>>(
        quad.ix, n / kQuad, reinterpret_cast<const float*>(x), relu_mask, reinterpret_cast<const float*>(dy), relu,
        saved_mean, saved_inv_std, coefficients, reinterpret_cast<float*>(dx_host_type),
        reinterpret_cast<float*>(dresidual_host_type));
    DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm backward kernels";
    return;
  }
  backward_apply_kernel<D>
      <<<one_wave_grid(kernel_address(backward_apply_kernel<D>), kThreads, n), kThreads, 0, stream>>>(
          launch.ix, n, x, relu_mask, dy, relu, saved_mean, saved_inv_std, coefficients,
          reinterpret_cast<D*>(dx_host_type), reinterpret_cast<D*>(dresidual_host_type));
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm backward kernels";
}

#define DTRAIN_INSTANTIATE(T)                                                                                         \
  template void batch_norm_forward_train<T>(cudaStream_t, const BatchNormDims&, const T*, const float*, const float*, \
                                            const T*, bool, T*, float*, float*, float*, float*, uint8_t*,             \
                                            BatchStatsReducer*);                                                      \
  template void batch_norm_forward_eval<T>(cudaStream_t, const BatchNormDims&, const T*, const float*, const float*,  \
                                           const float*, const float*, const T*, bool, T*);                           \
  template void batch_norm_backward<T>(cudaStream_t, const BatchNormDims&, const T*, const uint8_t*, const T*,        \
                                       const float*, const float*, const float*, bool, T*, T*, float*, float*,        \
                                       BatchStatsReducer*);
DTRAIN_INSTANTIATE(float)
DTRAIN_INSTANTIATE(runtime::bfloat16)
#undef DTRAIN_INSTANTIATE

}  // namespace dtrain::models::cuda
