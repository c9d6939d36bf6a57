#pragma once
// The vector widths of the batch norm passes (batch_norm.cu). Every pass is written once over
// Vectors<D, kWidth>: a thread moves kWidth elements of type D with one load or store, and they
// hold kChannels channels. What the widths do differently is here, each the same math as the
// one-element path, a vector at a time:
//   Vectors<D, 1>: one element; fp32 or bf16, NCHW or NHWC, any alignment (the fallback);
//   Vectors<__nv_bfloat16, 8>: bf16 NHWC, the 8 adjacent channels of one position (16 bytes);
//     taken when C is a multiple of 8 and every tensor is 16-byte aligned (always, for tensors
//     from the caching allocator);
//   Vectors<float, 4>: fp32 NCHW, 4 adjacent positions of one channel (16 bytes); taken when H*W
//     is a multiple of 4, the tensor has fewer than 2^32 elements and every tensor is 16-byte
//     aligned.
// Each provides, for the reductions (grid: channel blocks x row blocks of kThreads threads):
//   rows (of type Row): a channel's row vectors; at(r, c0): the first element of row vector r of
//   channel c0 (the first of kChannels); lanes(): the thread's channel and row lane, and slots
//   (channel groups per block); has(c0): whether c0 is a channel; kRowsPerThread: the fewest row
//   vectors a thread is given; ThreadMoments and fold(): the forward statistics' running moments
//   and how a vector's values enter them;
// and for the element-wise passes (grid-stride over the vectors): Walk, the channel of each vector
// a thread visits, and MaskWord, the unit in which the forward writes the ReLU mask. In both kinds
// of pass a thread takes kPerIteration vectors per loop iteration and issues all their loads before
// the math of the first (batch_norm_passes.cuh says why): load_raw() gives a vector as stored (Raw:
// 16 bytes hold 8 bf16 in 4 registers, where 8 floats take 8) and widen() its floats; load() is
// the two at once.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "models/cuda/batch_norm.h"
#include "models/cuda/moments.h"
#include "runtime/cuda/device_elements.cuh"

namespace dtrain::models::cuda::batch_norm_detail {

constexpr int kThreads = 256;  // per block, in every pass

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
inline bool fits_32_bits(const BatchNormDims& d) {
  return int64_t{d.batch} * d.spatial * d.channels <= int64_t{UINT32_MAX};
}

// A reduction thread's place: its first channel, its row lane of the block's `lanes`, and the
// block's channel slots (kChannels channels each; the thread's slot is threadIdx.x % slots).
struct Lanes {
  int c0, lane_r, lanes, slots;
};
template <int kChannels>
__device__ inline Lanes block_lanes(int slots) {
  const int lane_s = threadIdx.x % slots;
  return {static_cast<int>((blockIdx.x * slots + lane_s) * kChannels), static_cast<int>(threadIdx.x / slots),
          static_cast<int>(blockDim.x / slots), slots};
}

// The channel of each vector an element-wise thread visits, from the indexer.
template <typename Ix>
struct IndexedWalk {
  static constexpr bool kFixed = false;  // the channel may change from one vector to the next
  Ix ix;
  __device__ int channel(int64_t i) const { return ix.channel_of(i); }
  __device__ void advance() {}
};

template <typename D, int kWidth>
struct Vectors;

template <typename D>
struct Vectors<D, 1> {
  using Element = D;
  using Raw = D;  // a vector as loaded, before widen()
  using Row = int64_t;
  using MaskWord = uint32_t;  // a warp's 32 bits are one word of the mask
  using ThreadMoments = Moments;
  using Walk = IndexedWalk<Indexer>;
  static constexpr int kWidth = 1, kChannels = 1, kRowsPerThread = 16, kPerIteration = 1;
  Indexer ix;
  int64_t rows;
  int slots;  // NHWC: 32 (the 32 threads of a warp read 32 adjacent channels); NCHW: 1 (adjacent rows are adjacent)

  static Vectors of(const BatchNormDims& d) {
    return {{d.channels, d.spatial, d.channels_last, fits_32_bits(d)},
            int64_t{d.batch} * d.spatial,
            d.channels_last ? 32 : 1};
  }
  __host__ __device__ int channels() const { return ix.channels; }
  __device__ Lanes lanes() const { return block_lanes<1>(slots); }
  __device__ bool has(int c) const { return c < ix.channels; }
  __device__ int64_t at(Row r, int c) const { return ix(r, c); }
  __device__ Walk walk() const { return {ix}; }
  __device__ static D load_raw(const D* p, int64_t i) { return p[i]; }
  __device__ static void widen(const D& raw, float out[1]) { out[0] = runtime::cuda::load(&raw, 0); }
  __device__ static void load(const D* p, int64_t i, float out[1]) { out[0] = runtime::cuda::load(p, i); }
  __device__ static void store(D* p, int64_t i, const float in[1]) { runtime::cuda::store(p, i, in[0]); }
  __device__ static void fold(Moments& m, const float v[1]) { add_value(m, v[0]); }
};

// The moments of 8 channels over the same rows (one count).
struct OctetMoments {
  int64_t n;
  float mean[8], m2[8];
};
// An element-wise thread's one channel group: the launch (batch_norm.cu's elementwise_grid) makes
// the grid's stride a multiple of C elements, so every vector a thread visits, q + k * stride,
// starts at the same channel as its first, q. Its coefficients are then loaded once, before the
// loop: with kPerIteration vectors in flight, one set of them in registers instead of one per
// vector, and no coefficient loads in the loop (up to 10 16-byte L1 reads per 16-byte vector in
// the backward). (With one vector per iteration, kept coefficients cost more registers than they
// saved: bench/results/2026-11-25_h200/bn_waves.)
struct FixedChannelWalk {
  static constexpr bool kFixed = true;
  int c0;
  __device__ int channel(int64_t) const { return c0; }
  __device__ void advance() {}
};

template <>
struct Vectors<__nv_bfloat16, 8> {
  using Element = __nv_bfloat16;
  using Raw = uint4;
  using Row = int64_t;
  using MaskWord = uint8_t;  // a thread's 8 bits are one byte of the mask
  using ThreadMoments = OctetMoments;
  using Walk = FixedChannelWalk;
  static constexpr int kWidth = 8, kChannels = 8, kRowsPerThread = 8, kPerIteration = 4;
  static_assert(kWidth == runtime::cuda::kBf16x8, "the BN vector path moves 8 bf16 channels a load");
  int channel_count;
  int64_t rows;
  int slots;  // 8-channel groups per block: a power of two, at most 32

  static Vectors of(const BatchNormDims& d) {
    Vectors v{d.channels, int64_t{d.batch} * d.spatial, 1};
    while (v.slots * 2 <= std::min(d.channels / kWidth, 32)) v.slots *= 2;
    return v;
  }
  __host__ __device__ int channels() const { return channel_count; }
  __device__ Lanes lanes() const { return block_lanes<kChannels>(slots); }
  __device__ bool has(int c0) const { return c0 < channel_count; }
  __device__ int64_t at(Row r, int c0) const { return r * channel_count + c0; }
  // The thread's first vector's channel group, which is all of its (see FixedChannelWalk).
  __device__ Walk walk() const {
    const int64_t first = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * kWidth;
    return {static_cast<int>(first % channel_count)};
  }
  __device__ static uint4 load_raw(const __nv_bfloat16* p, int64_t i) { return *reinterpret_cast<const uint4*>(p + i); }
  __device__ static void widen(const uint4& raw, float out[8]) { runtime::cuda::widen_bf16x8(raw, out); }
  __device__ static void load(const __nv_bfloat16* p, int64_t i, float out[8]) {
    runtime::cuda::load_bf16x8(p + i, out);
  }
  __device__ static void store(__nv_bfloat16* p, int64_t i, const float in[8]) {
    runtime::cuda::store_bf16x8(p + i, in);
  }
  // Welford per channel, one reciprocal for the 8.
  __device__ static void fold(OctetMoments& m, const float v[8]) {
    m.n += 1;
    const float inv_n = 1.0f / static_cast<float>(m.n);
#pragma unroll
    for (int k = 0; k < kWidth; ++k) {
      const float delta = v[k] - m.mean[k];
      m.mean[k] += delta * inv_n;
      m.m2[k] += delta * (v[k] - m.mean[k]);
    }
  }
};

// A channel's quads: quad q of channel c is image q / quads_per_plane, positions 4 * (q %
// quads_per_plane) on; 32-bit divisions (the host checks the element count).
struct QuadIndexer {
  int channels;
  uint32_t quads_per_plane;  // H*W / 4
  __device__ int64_t operator()(uint32_t q, int c) const {
    const uint32_t n = q / quads_per_plane, s = q % quads_per_plane;
    return (int64_t{n} * channels + c) * (int64_t{quads_per_plane} * 4) + int64_t{s} * 4;
  }
  // The channel of element i (a multiple of 4).
  __device__ int channel_of(int64_t i) const {
    return static_cast<int>(static_cast<uint32_t>(i) / (quads_per_plane * 4) % static_cast<uint32_t>(channels));
  }
};

template <>
struct Vectors<float, 4> {
  using Element = float;
  using Raw = float4;
  using Row = uint32_t;
  using MaskWord = uint32_t;  // the 8 threads of a warp's quarter fill one word of the mask
  using ThreadMoments = Moments;
  using Walk = IndexedWalk<QuadIndexer>;
  static constexpr int kWidth = 4, kChannels = 1, kRowsPerThread = 4, kPerIteration = 1;
  static constexpr int slots = 1;  // a block per channel, its 256 lanes reading adjacent quads
  QuadIndexer ix;
  uint32_t rows;  // quads per channel: N * H*W / 4

  static Vectors of(const BatchNormDims& d) {
    return {{d.channels, static_cast<uint32_t>(d.spatial / kWidth)},
            static_cast<uint32_t>(int64_t{d.batch} * d.spatial / kWidth)};
  }
  __host__ __device__ int channels() const { return ix.channels; }
  __device__ Lanes lanes() const { return {static_cast<int>(blockIdx.x), static_cast<int>(threadIdx.x), kThreads, 1}; }
  __device__ bool has(int) const { return true; }
  __device__ int64_t at(Row q, int c) const { return ix(q, c); }
  __device__ Walk walk() const { return {ix}; }
  __device__ static float4 load_raw(const float* p, int64_t i) { return *reinterpret_cast<const float4*>(p + i); }
  __device__ static void widen(const float4& v, float out[4]) {
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  }
  __device__ static void load(const float* p, int64_t i, float out[4]) { widen(load_raw(p, i), out); }
  __device__ static void store(float* p, int64_t i, const float in[4]) {
    *reinterpret_cast<float4*>(p + i) = make_float4(in[0], in[1], in[2], in[3]);
  }
  // The quad's own moments, then one merge (one division per quad instead of one per value).
  __device__ static void fold(Moments& m, const float v[4]) {
    const float mean = (v[0] + v[1] + v[2] + v[3]) * 0.25f;
    float m2 = 0;
#pragma unroll
    for (int k = 0; k < kWidth; ++k) m2 += (v[k] - mean) * (v[k] - mean);
    m = merge(m, Moments{kWidth, mean, m2});
  }
};

// Per-channel values (statistics, coefficients) of a vector's kChannels channels from c on, of
// the array at p + offset: 8 as two 16-byte loads. (One channel reads p[offset + c]: the form
// (p + offset)[c] changes the one-element and quad kernels' register counts, so their blocks per
// SM and their one-wave grids.)
template <int kChannels>
__device__ inline void channel_values(const float* __restrict__ p, int c, float out[kChannels], int offset = 0) {
  if constexpr (kChannels == 1) {
    out[0] = p[offset + c];
  } else {
    static_assert(kChannels == 8, "channel values come one or 8 at a time");
    const float4* q = reinterpret_cast<const float4*>(p + offset + c);
    const float4 a = __ldg(q), b = __ldg(q + 1);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  }
}

// Bit i of the ReLU mask (element i in memory order: byte i / 8, bit i % 8) says whether y_i > 0
// before rounding. Backward reads it instead of y: 1 bit per element instead of 16 or 32. (It
// differs from y > 0 only where the value v before rounding has 0 < v <= 2^-134, half bf16's
// smallest subnormal: y rounds to 0 and the mask still passes the gradient, far below bf16's
// resolution.) The kWidth bits of the vector at element i (a multiple of kWidth): bit k for
// element i + k; 8 of them are the byte i / 8.
template <int kWidth>
__device__ inline uint32_t relu_mask_bits(const uint8_t* __restrict__ mask, int64_t i) {
  if constexpr (kWidth == 8) {
    return mask[i / 8];
  } else {
    return (mask[i >> 3] >> (i & 7)) & ((1u << kWidth) - 1);
  }
}

// A warp's mask bits (`bits`: kWidth of them per thread, for the vector first + lane) written as
// 32-bit words: one ballot for one bit per thread, else the 32 / kWidth lanes of each word OR
// their bits together by shuffles.
template <int kWidth>
__device__ inline void store_warp_mask(uint32_t* __restrict__ mask, int64_t first, int lane, int64_t vectors,
                                       uint32_t bits) {
  if constexpr (kWidth == 1) {
    const uint32_t word = __ballot_sync(0xffffffffu, bits != 0);
    if (lane == 0) mask[first / 32] = word;
  } else {
    constexpr int kLanesPerWord = 32 / kWidth;
    bits <<= kWidth * (lane % kLanesPerWord);
    for (int offset = 1; offset < kLanesPerWord; offset *= 2) bits |= __shfl_xor_sync(0xffffffffu, bits, offset);
    if (lane % kLanesPerWord == 0 && first + lane < vectors) mask[(first + lane) / kLanesPerWord] = bits;
  }
}

// A block's per-thread partial statistics in shared memory, merged over the row lanes into row
// lane 0 by merge_row_lanes. One channel a thread: whole structs; 8 channels: an array per field
// and channel (18 KB for the moments, where structs would take 32 KB and fewer blocks per SM).
template <int kChannels>
struct MomentsTile;
template <>
struct MomentsTile<1> {
  Moments m[kThreads];
  __device__ void put(int t, const Moments& v) { m[t] = v; }
  __device__ void merge(int t, int o) { m[t] = cuda::merge(m[t], m[o]); }
  __device__ void write(int t, Moments* out) const { *out = m[t]; }
};
template <>
struct MomentsTile<8> {
  int64_t n[kThreads];
  float mean[8][kThreads], m2[8][kThreads];
  __device__ void put(int t, const OctetMoments& v) {
    n[t] = v.n;
#pragma unroll
    for (int k = 0; k < 8; ++k) mean[k][t] = v.mean[k], m2[k][t] = v.m2[k];
  }
  __device__ void merge(int t, int o) {
    const int64_t n_t = n[t], n_o = n[o];  // read once: the 8 merges share the counts
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const Moments m = cuda::merge(Moments{n_t, mean[k][t], m2[k][t]}, Moments{n_o, mean[k][o], m2[k][o]});
      mean[k][t] = m.mean;
      m2[k][t] = m.m2;
    }
    n[t] = n_t + n_o;
  }
  __device__ void write(int t, Moments* out) const {
#pragma unroll
    for (int k = 0; k < 8; ++k) out[k] = Moments{n[t], mean[k][t], m2[k][t]};
  }
};

// The backward's sums of dy' and dy' * xhat.
template <int kChannels>
struct SumsTile;
template <>
struct SumsTile<1> {
  float2 s[kThreads];
  __device__ void put(int t, const float dy[1], const float dy_xhat[1]) { s[t] = make_float2(dy[0], dy_xhat[0]); }
  __device__ void merge(int t, int o) {
    const float2 other = s[o];
    s[t].x += other.x;
    s[t].y += other.y;
  }
  __device__ void write(int t, float2* out) const { *out = s[t]; }
};
template <>
struct SumsTile<8> {
  float dy[8][kThreads], dy_xhat[8][kThreads];
  __device__ void put(int t, const float sum_dy[8], const float sum_dy_xhat[8]) {
#pragma unroll
    for (int k = 0; k < 8; ++k) dy[k][t] = sum_dy[k], dy_xhat[k][t] = sum_dy_xhat[k];
  }
  __device__ void merge(int t, int o) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      dy[k][t] += dy[k][o];
      dy_xhat[k][t] += dy_xhat[k][o];
    }
  }
  __device__ void write(int t, float2* out) const {
#pragma unroll
    for (int k = 0; k < 8; ++k) out[k] = make_float2(dy[k][t], dy_xhat[k][t]);
  }
};

// Tree merge of the row lanes (deterministic): at each step, row lane r < stride takes in row lane
// r + stride of the same channel slot. Starts and ends with the block synchronized.
template <typename Tile>
__device__ inline void merge_row_lanes(Tile& tile, const Lanes& l) {
  __syncthreads();
  for (int stride = l.lanes / 2; stride > 0; stride /= 2) {
    if (l.lane_r < stride) tile.merge(threadIdx.x, threadIdx.x + stride * l.slots);
    __syncthreads();
  }
}

}  // namespace dtrain::models::cuda::batch_norm_detail
