#pragma once
// The passes of batch norm over the activations (batch_norm.cu), each written once over the
// vector widths of batch_norm_vectors.cuh: the forward statistics' and the backward's per-row-block
// partials (the first level of the reductions), the normalization (+ residual, + ReLU and its
// mask) and the backward's dx (+ dresidual).
#include <cstdint>

#include "models/cuda/batch_norm_vectors.cuh"
#include "models/cuda/moments.h"

namespace dtrain::models::cuda::batch_norm_detail {

// Per (row block, channel): the moments of that block's rows, by V::fold per thread, then Chan's
// merge across the block's row lanes. partials[row_block * C + c].
template <typename V>
__global__ void partial_moments_kernel(V v, const typename V::Element* __restrict__ x, Moments* __restrict__ partials) {
  const Lanes l = v.lanes();
  typename V::ThreadMoments m{};
  if (v.has(l.c0)) {
    using Row = typename V::Row;
    for (Row r = blockIdx.y * Row(l.lanes) + l.lane_r; r < v.rows; r += Row(gridDim.y) * l.lanes) {
      float values[V::kWidth];
      V::load(x, v.at(r, l.c0), values);
      V::fold(m, values);
    }
  }
  __shared__ MomentsTile<V::kChannels> tile;
  tile.put(threadIdx.x, m);
  merge_row_lanes(tile, l);
  if (l.lane_r == 0 && v.has(l.c0)) tile.write(threadIdx.x, partials + blockIdx.y * int64_t{v.channels()} + l.c0);
}

// Backward partials per (row block, channel): sum of dy' and of dy' * xhat, dy' = dy through the
// ReLU mask.
template <typename V>
__global__ void backward_partials_kernel(V v, const typename V::Element* __restrict__ x,
                                         const uint8_t* __restrict__ relu_mask,
                                         const typename V::Element* __restrict__ dy, bool relu,
                                         const float* __restrict__ mean, const float* __restrict__ inv_std,
                                         float2* __restrict__ partials) {
  constexpr int kWidth = V::kWidth, kChannels = V::kChannels;
  const Lanes l = v.lanes();
  float sum_dy[kChannels] = {}, sum_dy_xhat[kChannels] = {};
  if (v.has(l.c0)) {
    float mu[kChannels], is[kChannels];
    channel_values<kChannels>(mean, l.c0, mu);
    channel_values<kChannels>(inv_std, l.c0, is);
    using Row = typename V::Row;
    for (Row r = blockIdx.y * Row(l.lanes) + l.lane_r; r < v.rows; r += Row(gridDim.y) * l.lanes) {
      const int64_t i = v.at(r, l.c0);
      float g[kWidth], xs[kWidth];
      V::load(dy, i, g);
      V::load(x, i, xs);
      const uint32_t keep = relu ? relu_mask_bits<kWidth>(relu_mask, i) : (1u << kWidth) - 1;
#pragma unroll
      for (int k = 0; k < kWidth; ++k) {
        const int c = k % kChannels;  // the element's channel among the vector's
        const float gk = (keep >> k) & 1 ? g[k] : 0.0f;
        sum_dy[c] += gk;
        sum_dy_xhat[c] += gk * (xs[k] - mu[c]) * is[c];
      }
    }
  }
  __shared__ SumsTile<kChannels> tile;
  tile.put(threadIdx.x, sum_dy, sum_dy_xhat);
  merge_row_lanes(tile, l);
  if (l.lane_r == 0 && v.has(l.c0)) tile.write(threadIdx.x, partials + blockIdx.y * int64_t{v.channels()} + l.c0);
}

// y = x * scale + shift [+ residual], through the ReLU when relu, for the vector at element i of
// channels c0 on; returns the mask bits (bit k: element i + k's value before the ReLU is > 0).
// Vectors add zeros for a missing residual rather than branch per element (a -0 becomes +0).
template <typename V>
__device__ inline uint32_t normalize(int64_t i, int c0, const typename V::Element* __restrict__ x,
                                     const float* __restrict__ scale, const float* __restrict__ shift,
                                     const typename V::Element* __restrict__ residual, bool relu,
                                     typename V::Element* __restrict__ y) {
  constexpr int kWidth = V::kWidth, kChannels = V::kChannels;
  float xs[kWidth], a[kChannels], b[kChannels], r[kWidth] = {};
  V::load(x, i, xs);
  channel_values<kChannels>(scale, c0, a);
  channel_values<kChannels>(shift, c0, b);
  if (kWidth > 1 && residual != nullptr) V::load(residual, i, r);  // the one-element path loads below
  uint32_t bits = 0;
#pragma unroll
  for (int k = 0; k < kWidth; ++k) {
    float out = fmaf(xs[k], a[k % kChannels], b[k % kChannels]);
    if constexpr (kWidth > 1) {
      out += r[k];
    } else if (residual != nullptr) {
      out += runtime::cuda::load(residual, i);
    }
    bits |= uint32_t{out > 0.0f} << k;
    xs[k] = relu ? fmaxf(out, 0.0f) : out;
  }
  V::store(y, i, xs);
  return bits;
}

// The normalization over `vectors` vectors, writing the ReLU mask when relu_mask is not null:
// bytes, one per thread, for 8-wide vectors; else 32-bit words, a warp's bits at a time (each warp
// walks 32 consecutive vectors at a time: blocks of 256 threads make a warp's first vector a
// multiple of 32).
template <typename V>
__global__ void apply_kernel(V v, int64_t vectors, const typename V::Element* __restrict__ x,
                             const float* __restrict__ scale, const float* __restrict__ shift,
                             const typename V::Element* __restrict__ residual, bool relu,
                             typename V::Element* __restrict__ y, typename V::MaskWord* __restrict__ relu_mask) {
  constexpr int kWidth = V::kWidth;
  typename V::Walk walk = v.walk();
  if constexpr (sizeof(typename V::MaskWord) == 1) {
    for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < vectors;
         q += int64_t{gridDim.x} * blockDim.x, walk.advance()) {
      const uint32_t bits = normalize<V>(q * kWidth, walk.channel(q * kWidth), x, scale, shift, residual, relu, y);
      if (relu_mask != nullptr) relu_mask[q] = static_cast<uint8_t>(bits);
    }
  } else {
    const int lane = threadIdx.x % 32;
    for (int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x - lane; first < vectors;
         first += int64_t{gridDim.x} * blockDim.x, walk.advance()) {
      const int64_t q = first + lane;
      uint32_t bits = 0;
      if (q < vectors) bits = normalize<V>(q * kWidth, walk.channel(q * kWidth), x, scale, shift, residual, relu, y);
      if (relu_mask != nullptr) store_warp_mask<kWidth>(relu_mask, first, lane, vectors, bits);
    }
  }
}

// dx = dy' * k - a - xhat * b with the coefficients k, a, b of write_backward, and dresidual = dy'
// when it is not null.
template <typename V>
__global__ void backward_apply_kernel(V v, int64_t vectors, const typename V::Element* __restrict__ x,
                                      const uint8_t* __restrict__ relu_mask, const typename V::Element* __restrict__ dy,
                                      bool relu, const float* __restrict__ mean, const float* __restrict__ inv_std,
                                      const float* __restrict__ coefficients, typename V::Element* __restrict__ dx,
                                      typename V::Element* __restrict__ dresidual) {
  constexpr int kWidth = V::kWidth, kChannels = V::kChannels;
  const int channels = v.channels();
  typename V::Walk walk = v.walk();
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < vectors;
       q += int64_t{gridDim.x} * blockDim.x, walk.advance()) {
    const int64_t i = q * kWidth;
    const int c0 = walk.channel(i);
    float g[kWidth], xs[kWidth], mu[kChannels], is[kChannels], k_[kChannels], a[kChannels], b[kChannels];
    V::load(dy, i, g);
    V::load(x, i, xs);
    const uint32_t keep = relu ? relu_mask_bits<kWidth>(relu_mask, i) : (1u << kWidth) - 1;
    channel_values<kChannels>(mean, c0, mu);
    channel_values<kChannels>(inv_std, c0, is);
    channel_values<kChannels>(coefficients, c0, k_);
    channel_values<kChannels>(coefficients, c0, a, channels);
    channel_values<kChannels>(coefficients, c0, b, 2 * channels);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      if (!((keep >> k) & 1)) g[k] = 0.0f;
    }
    if (dresidual != nullptr) V::store(dresidual, i, g);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      const int c = k % kChannels;
      xs[k] = g[k] * k_[c] - a[c] - (xs[k] - mu[c]) * is[c] * b[c];
    }
    V::store(dx, i, xs);
  }
}

}  // namespace dtrain::models::cuda::batch_norm_detail
