// The fp32 NCHW fast path of batch_norm.cu: 4 consecutive positions of one channel (16 bytes) per
// thread and load, taken when H*W is a multiple of 4, the tensor has fewer than 2^32 elements and
// every pointer is 16-byte aligned. The same math as the generic kernels, a quad at a time.
// Included by batch_norm.cu inside its anonymous namespace (kThreads, Moments, the mask layout).
#pragma once

constexpr int kQuad = 4;

__device__ inline void load4(const float* __restrict__ p, int64_t i, float out[kQuad]) {
  const float4 v = *reinterpret_cast<const float4*>(p + i);
  out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
}
__device__ inline void store4(float* __restrict__ p, int64_t i, const float in[kQuad]) {
  *reinterpret_cast<float4*>(p + i) = make_float4(in[0], in[1], in[2], in[3]);
}
// The ReLU mask's 4 bits of elements i .. i + 3 (i a multiple of 4).
__device__ inline uint32_t relu_mask4(const uint8_t* __restrict__ mask, int64_t i) {
  return (mask[i >> 3] >> (i & 7)) & 0xfu;
}

// A channel's quads: quad q of channel c is image q / quads_per_plane, positions 4 * (q %
// quads_per_plane) on; 32-bit divisions (the host checks the element count).
struct QuadIndexer {
  int channels;
  uint32_t quads_per_plane;  // H*W / 4
  __device__ int64_t operator()(uint32_t q, int c) const {
    const uint32_t n = q / quads_per_plane, s = q % quads_per_plane;
    return (int64_t{n} * channels + c) * (int64_t{quads_per_plane} * kQuad) + int64_t{s} * kQuad;
  }
  // The channel of element i (a multiple of 4).
  __device__ int channel_of(int64_t i) const {
    return static_cast<int>(static_cast<uint32_t>(i) / (quads_per_plane * kQuad) % static_cast<uint32_t>(channels));
  }
};

QuadIndexer quad_indexer(const BatchNormDims& d) {
  return {d.channels, static_cast<uint32_t>(d.spatial / kQuad)};
}

// Grid: channels x row blocks, 256 quad lanes per block (adjacent lanes read adjacent quads).
struct QuadLaunch {
  QuadIndexer ix;
  uint32_t quads;  // per channel: N * H*W / 4
  int row_blocks;
  dim3 grid() const { return dim3(ix.channels, row_blocks); }
};
QuadLaunch quad_launch(const BatchNormDims& d, const void* kernel) {
  QuadLaunch launch{quad_indexer(d), static_cast<uint32_t>(int64_t{d.batch} * d.spatial / kQuad), 1};
  const int64_t want = std::max<int64_t>(1, resident_blocks(kernel, kThreads) / d.channels);
  launch.row_blocks = static_cast<int>(std::clamp<int64_t>(launch.quads / (kThreads * 4), 1, want));
  return launch;
}

// A block's 256 lanes' values tree-summed into lane 0 (deterministic), by `combine`.
template <typename V, typename Combine>
__device__ V block_reduce(V mine, V* shared, Combine combine) {
  shared[threadIdx.x] = mine;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] = combine(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  return shared[0];
}

__global__ void partial_moments_quad_kernel(QuadIndexer ix, uint32_t quads, const float* __restrict__ x,
                                            Moments* __restrict__ partials) {
  const int c = blockIdx.x;
  Moments m{0, 0, 0};
  for (uint32_t q = blockIdx.y * kThreads + threadIdx.x; q < quads; q += gridDim.y * kThreads) {
    float v[kQuad];
    load4(x, ix(q, c), v);
    // The quad's own moments, then one merge (one division per quad instead of one per value).
    const float mean = (v[0] + v[1] + v[2] + v[3]) * 0.25f;
    float m2 = 0;
#pragma unroll
    for (int k = 0; k < kQuad; ++k) m2 += (v[k] - mean) * (v[k] - mean);
    m = merge(m, Moments{kQuad, mean, m2});
  }
  __shared__ Moments shared[kThreads];
  const Moments all = block_reduce(m, shared, [](Moments a, Moments b) { return merge(a, b); });
  if (threadIdx.x == 0) partials[blockIdx.y * int64_t{ix.channels} + c] = all;
}

__global__ void backward_partials_quad_kernel(QuadIndexer ix, uint32_t quads, const float* __restrict__ x,
                                              const uint8_t* __restrict__ relu_mask, const float* __restrict__ dy,
                                              bool relu, const float* __restrict__ mean,
                                              const float* __restrict__ inv_std, float2* __restrict__ partials) {
  const int c = blockIdx.x;
  const float mu = mean[c], is = inv_std[c];
  float sum_dy = 0, sum_dy_xhat = 0;
  for (uint32_t q = blockIdx.y * kThreads + threadIdx.x; q < quads; q += gridDim.y * kThreads) {
    const int64_t i = ix(q, c);
    float g[kQuad], xs[kQuad];
    load4(dy, i, g);
    load4(x, i, xs);
    const uint32_t keep = relu ? relu_mask4(relu_mask, i) : 0xfu;
#pragma unroll
    for (int k = 0; k < kQuad; ++k) {
      const float gk = (keep >> k) & 1 ? g[k] : 0.0f;
      sum_dy += gk;
      sum_dy_xhat += gk * (xs[k] - mu) * is;
    }
  }
  __shared__ float2 shared[kThreads];
  const float2 all = block_reduce(make_float2(sum_dy, sum_dy_xhat), shared,
                                  [](float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); });
  if (threadIdx.x == 0) partials[blockIdx.y * int64_t{ix.channels} + c] = all;
}

// Element-wise over quads; each warp walks 32 consecutive quads (128 elements, 4 mask words) at a
// time, and the 8 lanes of each mask word OR their 4 bits together by shuffles.
__global__ void apply_quad_kernel(QuadIndexer ix, int64_t quads, const float* __restrict__ x,
                                  const float* __restrict__ scale, const float* __restrict__ shift,
                                  const float* __restrict__ residual, bool relu, float* __restrict__ y,
                                  uint32_t* __restrict__ relu_mask) {
  const int lane = threadIdx.x % 32;
  for (int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x - lane; first < quads;
       first += int64_t{gridDim.x} * blockDim.x) {
    const int64_t q = first + lane;
    uint32_t bits = 0;
    if (q < quads) {
      const int64_t i = q * kQuad;
      const int c = ix.channel_of(i);
      const float a = scale[c], b = shift[c];
      float xs[kQuad], r[kQuad] = {};
      load4(x, i, xs);
      if (residual != nullptr) load4(residual, i, r);
#pragma unroll
      for (int k = 0; k < kQuad; ++k) {
        const float out = xs[k] * a + b + r[k];
        bits |= uint32_t{out > 0.0f} << k;
        xs[k] = relu ? fmaxf(out, 0.0f) : out;
      }
      store4(y, i, xs);
    }
    if (relu_mask != nullptr) {
      bits <<= kQuad * (lane % 8);
      for (int offset = 1; offset < 8; offset *= 2) bits |= __shfl_xor_sync(0xffffffffu, bits, offset);
      if (lane % 8 == 0 && first + lane < quads) relu_mask[(first + lane) / 8] = bits;
    }
  }
}

__global__ void backward_apply_quad_kernel(QuadIndexer ix, int64_t quads, const float* __restrict__ x,
                                           const uint8_t* __restrict__ relu_mask, const float* __restrict__ dy,
                                           bool relu, const float* __restrict__ mean, const float* __restrict__ inv_std,
                                           const float* __restrict__ coefficients, float* __restrict__ dx,
                                           float* __restrict__ dresidual) {
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < quads; q += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = q * kQuad;
    const int c = ix.channel_of(i);
    const float mu = mean[c], is = inv_std[c], k_ = coefficients[c], a = coefficients[ix.channels + c],
                b = coefficients[2 * ix.channels + c];
    float g[kQuad], xs[kQuad];
    load4(dy, i, g);
    load4(x, i, xs);
    const uint32_t keep = relu ? relu_mask4(relu_mask, i) : 0xfu;
#pragma unroll
    for (int k = 0; k < kQuad; ++k) {
      if (!((keep >> k) & 1)) g[k] = 0.0f;
    }
    if (dresidual != nullptr) store4(dresidual, i, g);
#pragma unroll
    for (int k = 0; k < kQuad; ++k) xs[k] = g[k] * k_ - a - (xs[k] - mu) * is * b;
    store4(dx, i, xs);
  }
}
