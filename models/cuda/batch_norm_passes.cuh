#pragma once
// The passes of batch norm over the activations (batch_norm.cu), each written once over the
// vector widths of batch_norm_vectors.cuh: the forward statistics' and the backward's per-row-block
// partials (the first level of the reductions), the normalization (+ residual, + ReLU and its
// mask) and the backward's dx (+ dresidual).
//
// Each thread takes V::kPerIteration vectors per loop iteration, the k-th a whole grid (or row)
// stride after the first, and issues every global load of all of them before the math of the
// first. With one 16-byte load per operand and thread, waited on before the next, too few bytes
// were in flight per SM to keep HBM busy: the bf16 passes moved 2.7-3.7 TB/s of the H200's 4.8
// (bench/results/2026-11-25_h200/kernel_profile). Only the schedule changes: every element gets
// the same arithmetic as with one vector per iteration, and a reduction thread folds its rows in
// the same order as before, so for the same grid the results are the same bits. (The reductions'
// row blocks follow the kernel's occupancy, resident_blocks, so a change of register count moves
// the row partition and with it the last bits of the statistics.)
#include <cstdint>

#include "models/cuda/batch_norm_vectors.cuh"
#include "models/cuda/moments.h"

namespace dtrain::models::cuda::batch_norm_detail {

// The k-th of a thread's vectors (or rows) this iteration, first + k * stride, clamped to the last
// one, end - 1, so that the loads need no branch: a load under a branch of its own is followed by
// its use (the conversion to float) before the next is issued, which waits for it. A clamped
// one's values are not used: its fold, its math and its stores are skipped.
template <typename I>
__device__ inline I clamped(I first, int k, I stride, I end) {
  if (k == 0) return first;
  const I at = first + k * stride;
  return at < end ? at : end - 1;
}

// Per (row block, channel): the moments of that block's rows, by V::fold per thread, then Chan's
// merge across the block's row lanes. partials[row_block * C + c].
template <typename V>
__global__ void partial_moments_kernel(V v, const typename V::Element* __restrict__ x, Moments* __restrict__ partials) {
  constexpr int kU = V::kPerIteration;
  const Lanes l = v.lanes();
  typename V::ThreadMoments m{};
  if (v.has(l.c0)) {
    using Row = typename V::Row;
    const Row step = Row(gridDim.y) * l.lanes;
    for (Row r = blockIdx.y * Row(l.lanes) + l.lane_r; r < v.rows; r += kU * step) {
      typename V::Raw raw[kU];
#pragma unroll
      for (int k = 0; k < kU; ++k) raw[k] = V::load_raw(x, v.at(clamped(r, k, step, v.rows), l.c0));
#pragma unroll
      for (int k = 0; k < kU; ++k) {
        if (r + k * step >= v.rows) continue;
        float values[V::kWidth];
        V::widen(raw[k], values);
        V::fold(m, values);
      }
    }
  }
  __shared__ MomentsTile<V::kChannels> tile;
  tile.put(threadIdx.x, m);
  merge_row_lanes(tile, l);
  if (l.lane_r == 0 && v.has(l.c0)) tile.write(threadIdx.x, partials + blockIdx.y * int64_t{v.channels()} + l.c0);
}

// Backward partials per (row block, channel): sum of dy' and of dy' * xhat, dy' = dy through the
// ReLU mask.
template <int kWidth, int kChannels>
__device__ inline void add_backward_sums(const float g[kWidth], const float xs[kWidth], uint32_t keep,
                                         const float mu[kChannels], const float is[kChannels], float sum_dy[kChannels],
                                         float sum_dy_xhat[kChannels]) {
#pragma unroll
  for (int k = 0; k < kWidth; ++k) {
    const int c = k % kChannels;  // the element's channel among the vector's
    const float gk = (keep >> k) & 1 ? g[k] : 0.0f;
    sum_dy[c] += gk;
    sum_dy_xhat[c] += gk * (xs[k] - mu[c]) * is[c];
  }
}
template <typename V>
__global__ void backward_partials_kernel(V v, const typename V::Element* __restrict__ x,
                                         const uint8_t* __restrict__ relu_mask,
                                         const typename V::Element* __restrict__ dy, bool relu,
                                         const float* __restrict__ mean, const float* __restrict__ inv_std,
                                         float2* __restrict__ partials) {
  constexpr int kWidth = V::kWidth, kChannels = V::kChannels, kU = V::kPerIteration;
  const Lanes l = v.lanes();
  float sum_dy[kChannels] = {}, sum_dy_xhat[kChannels] = {};
  if (v.has(l.c0)) {
    float mu[kChannels], is[kChannels];
    channel_values<kChannels>(mean, l.c0, mu);
    channel_values<kChannels>(inv_std, l.c0, is);
    using Row = typename V::Row;
    const Row step = Row(gridDim.y) * l.lanes;
    for (Row r = blockIdx.y * Row(l.lanes) + l.lane_r; r < v.rows; r += kU * step) {
      typename V::Raw raw_g[kU], raw_x[kU];
      uint32_t keep[kU];
#pragma unroll
      for (int k = 0; k < kU; ++k) {
        const int64_t i = v.at(clamped(r, k, step, v.rows), l.c0);
        raw_g[k] = V::load_raw(dy, i);
        raw_x[k] = V::load_raw(x, i);
        keep[k] = relu ? relu_mask_bits<kWidth>(relu_mask, i) : (1u << kWidth) - 1;
      }
#pragma unroll
      for (int k = 0; k < kU; ++k) {
        if (r + k * step >= v.rows) continue;
        float g[kWidth], xs[kWidth];
        V::widen(raw_g[k], g);
        V::widen(raw_x[k], xs);
        add_backward_sums<kWidth, kChannels>(g, xs, keep[k], mu, is, sum_dy, sum_dy_xhat);
      }
    }
  }
  __shared__ SumsTile<kChannels> tile;
  tile.put(threadIdx.x, sum_dy, sum_dy_xhat);
  merge_row_lanes(tile, l);
  if (l.lane_r == 0 && v.has(l.c0)) tile.write(threadIdx.x, partials + blockIdx.y * int64_t{v.channels()} + l.c0);
}

// y = x * scale + shift [+ residual], through the ReLU when relu, on a vector's values xs (then y),
// its channels' scale a and shift b, and the residual's values r (zeros for none: a -0 becomes +0);
// returns the mask bits (bit k: element k's value before the ReLU is > 0).
template <int kWidth, int kChannels>
__device__ inline uint32_t normalize_values(float xs[kWidth], const float a[kChannels], const float b[kChannels],
                                            const float r[kWidth], bool relu) {
  uint32_t bits = 0;
#pragma unroll
  for (int k = 0; k < kWidth; ++k) {
    float out = fmaf(xs[k], a[k % kChannels], b[k % kChannels]);
    out += r[k];
    bits |= uint32_t{out > 0.0f} << k;
    xs[k] = relu ? fmaxf(out, 0.0f) : out;
  }
  return bits;
}

// normalize_values for the vector at element i of channels c0 on, loads and store included. The
// one-element path adds a residual only where there is one (no zeros: a -0 stays -0).
template <typename V>
__device__ inline uint32_t normalize(int64_t i, int c0, const typename V::Element* __restrict__ x,
                                     const float* __restrict__ scale, const float* __restrict__ shift,
                                     const typename V::Element* __restrict__ residual, bool relu,
                                     typename V::Element* __restrict__ y) {
  constexpr int kWidth = V::kWidth, kChannels = V::kChannels;
  float xs[kWidth], a[kChannels], b[kChannels];
  V::load(x, i, xs);
  channel_values<kChannels>(scale, c0, a);
  channel_values<kChannels>(shift, c0, b);
  uint32_t bits;
  if constexpr (kWidth > 1) {
    float r[kWidth] = {};
    if (residual != nullptr) V::load(residual, i, r);
    bits = normalize_values<kWidth, kChannels>(xs, a, b, r, relu);
  } else {
    float out = fmaf(xs[0], a[0], b[0]);
    if (residual != nullptr) out += runtime::cuda::load(residual, i);
    bits = uint32_t{out > 0.0f};
    xs[0] = relu ? fmaxf(out, 0.0f) : out;
  }
  V::store(y, i, xs);
  return bits;
}

// The normalization with a byte of mask per vector (8-wide vectors): kPerIteration vectors a
// thread at a time, their coefficients loaded once (the thread's channels are fixed).
template <typename V>
__device__ inline void apply_byte_masked(V v, int64_t vectors, const typename V::Element* __restrict__ x,
                                         const float* __restrict__ scale, const float* __restrict__ shift,
                                         const typename V::Element* __restrict__ residual, bool relu,
                                         typename V::Element* __restrict__ y, uint8_t* __restrict__ relu_mask) {
  constexpr int kWidth = V::kWidth, kChannels = V::kChannels, kU = V::kPerIteration;
  static_assert(V::Walk::kFixed, "the byte-mask path keeps one channel group's coefficients");
  const int c0 = v.walk().channel(0);
  float a[kChannels], b[kChannels];
  channel_values<kChannels>(scale, c0, a);
  channel_values<kChannels>(shift, c0, b);
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < vectors; q += kU * stride) {
    typename V::Raw raw_x[kU], raw_r[kU] = {};  // a missing residual's zeros widen to +0.0f
#pragma unroll
    for (int k = 0; k < kU; ++k) raw_x[k] = V::load_raw(x, clamped(q, k, stride, vectors) * kWidth);
    if (residual != nullptr) {
#pragma unroll
      for (int k = 0; k < kU; ++k) raw_r[k] = V::load_raw(residual, clamped(q, k, stride, vectors) * kWidth);
    }
#pragma unroll
    for (int k = 0; k < kU; ++k) {
      const int64_t qk = q + k * stride;
      if (qk >= vectors) continue;
      float xs[kWidth], r[kWidth];
      V::widen(raw_x[k], xs);
      V::widen(raw_r[k], r);
      const uint32_t bits = normalize_values<kWidth, kChannels>(xs, a, b, r, relu);
      V::store(y, qk * kWidth, xs);
      if (relu_mask != nullptr) relu_mask[qk] = static_cast<uint8_t>(bits);
    }
  }
}

// The normalization over `vectors` vectors, writing the ReLU mask when relu_mask is not null:
// bytes, one per vector, for 8-wide vectors; else 32-bit words, a warp's bits at a time (each warp
// walks 32 consecutive vectors at a time, one a thread: blocks of 256 threads make a warp's first
// vector a multiple of 32).
template <typename V>
__global__ void apply_kernel(V v, int64_t vectors, const typename V::Element* __restrict__ x,
                             const float* __restrict__ scale, const float* __restrict__ shift,
                             const typename V::Element* __restrict__ residual, bool relu,
                             typename V::Element* __restrict__ y, typename V::MaskWord* __restrict__ relu_mask) {
  constexpr int kWidth = V::kWidth;
  if constexpr (sizeof(typename V::MaskWord) == 1) {
    apply_byte_masked(v, vectors, x, scale, shift, residual, relu, y, relu_mask);
  } else {
    static_assert(V::kPerIteration == 1, "the warp-word mask takes one vector a thread at a time");
    typename V::Walk walk = v.walk();
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

// The backward's per-channel values for a vector's channels: the statistics and the coefficients
// k, a, b of write_backward.
template <int kChannels>
struct BackwardCoefficients {
  float mu[kChannels], is[kChannels], k[kChannels], a[kChannels], b[kChannels];
  __device__ void load(const float* __restrict__ mean, const float* __restrict__ inv_std,
                       const float* __restrict__ coefficients, int channels, int c0) {
    channel_values<kChannels>(mean, c0, mu);
    channel_values<kChannels>(inv_std, c0, is);
    channel_values<kChannels>(coefficients, c0, k);
    channel_values<kChannels>(coefficients, c0, a, channels);
    channel_values<kChannels>(coefficients, c0, b, 2 * channels);
  }
};

// dx = dy' * k - a - xhat * b on a vector's values: g (dy', through the mask already) and xs (x,
// then dx).
template <int kWidth, int kChannels>
__device__ inline void backward_values(const float g[kWidth], float xs[kWidth],
                                       const BackwardCoefficients<kChannels>& f) {
#pragma unroll
  for (int k = 0; k < kWidth; ++k) {
    const int c = k % kChannels;
    xs[k] = g[k] * f.k[c] - f.a[c] - (xs[k] - f.mu[c]) * f.is[c] * f.b[c];
  }
}

// dx = dy' * k - a - xhat * b with the coefficients k, a, b of write_backward, and dresidual = dy'
// when it is not null; kPerIteration vectors a thread at a time, whose coefficients are loaded once
// where the thread's channels are fixed, else for each vector.
template <typename V>
__global__ void backward_apply_kernel(V v, int64_t vectors, const typename V::Element* __restrict__ x,
                                      const uint8_t* __restrict__ relu_mask, const typename V::Element* __restrict__ dy,
                                      bool relu, const float* __restrict__ mean, const float* __restrict__ inv_std,
                                      const float* __restrict__ coefficients, typename V::Element* __restrict__ dx,
                                      typename V::Element* __restrict__ dresidual) {
  constexpr int kWidth = V::kWidth, kChannels = V::kChannels, kU = V::kPerIteration;
  constexpr bool kFixed = V::Walk::kFixed;
  static_assert(kU == 1 || kFixed, "several vectors an iteration share one channel group");
  const int channels = v.channels();
  typename V::Walk walk = v.walk();
  BackwardCoefficients<kChannels> f;
  if constexpr (kFixed) f.load(mean, inv_std, coefficients, channels, walk.channel(0));
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < vectors; q += kU * stride, walk.advance()) {
    typename V::Raw raw_g[kU], raw_x[kU];
    uint32_t keep[kU];
#pragma unroll
    for (int k = 0; k < kU; ++k) {
      const int64_t i = clamped(q, k, stride, vectors) * kWidth;
      raw_g[k] = V::load_raw(dy, i);
      raw_x[k] = V::load_raw(x, i);
      keep[k] = relu ? relu_mask_bits<kWidth>(relu_mask, i) : (1u << kWidth) - 1;
    }
#pragma unroll
    for (int k = 0; k < kU; ++k) {
      const int64_t i = (q + k * stride) * kWidth;
      if (i >= vectors * kWidth) continue;
      if constexpr (!kFixed) f.load(mean, inv_std, coefficients, channels, walk.channel(i));
      float g[kWidth], xs[kWidth];
      V::widen(raw_g[k], g);
      V::widen(raw_x[k], xs);
#pragma unroll
      for (int e = 0; e < kWidth; ++e) {
        if (!((keep[k] >> e) & 1)) g[e] = 0.0f;
      }
      if (dresidual != nullptr) V::store(dresidual, i, g);
      backward_values<kWidth, kChannels>(g, xs, f);
      V::store(dx, i, xs);
    }
  }
}

}  // namespace dtrain::models::cuda::batch_norm_detail
