#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "models/cuda/elementwise_launch.cuh"
#include "models/cuda/pooling.h"
#include "runtime/cuda/device_elements.cuh"

namespace dtrain::models::cuda {
namespace {

using runtime::cuda::DeviceTypeOf;
using runtime::cuda::load;
using runtime::cuda::store;

// A storage index split into (image, channel, row, column), for either layout. Threads take
// consecutive storage indices, so their loads and stores are coalesced in both layouts.
struct Position {
  int64_t n;
  int c, h, w;
};

// The same in 32-bit arithmetic, for indices below 2^32 (every tensor of ResNet-50 at batch 256):
// a 64-bit division is a long software sequence, and split does three.
__device__ Position split32(uint32_t i, uint32_t channels, uint32_t height, uint32_t width, bool channels_last) {
  if (channels_last) {
    const uint32_t c = i % channels;
    i /= channels;
    const uint32_t w = i % width;
    i /= width;
    return {i / height, static_cast<int>(c), static_cast<int>(i % height), static_cast<int>(w)};
  }
  const uint32_t w = i % width;
  i /= width;
  const uint32_t h = i % height;
  i /= height;
  return {i / channels, static_cast<int>(i % channels), static_cast<int>(h), static_cast<int>(w)};
}

__device__ Position split(int64_t i, int channels, int height, int width, bool channels_last) {
  if (i <= int64_t{UINT32_MAX}) return split32(static_cast<uint32_t>(i), channels, height, width, channels_last);
  if (channels_last) {
    const int c = static_cast<int>(i % channels);
    i /= channels;
    const int w = static_cast<int>(i % width);
    i /= width;
    return {i / height, c, static_cast<int>(i % height), w};
  }
  const int w = static_cast<int>(i % width);
  i /= width;
  const int h = static_cast<int>(i % height);
  i /= height;
  return {i / channels, static_cast<int>(i % channels), h, w};
}

__device__ int64_t join(const Position& p, int channels, int height, int width, bool channels_last) {
  return channels_last ? ((p.n * height + p.h) * width + p.w) * channels + p.c
                       : ((p.n * channels + p.c) * height + p.h) * width + p.w;
}

template <typename T>
__global__ void max_pool_forward_kernel(cpu::PoolShape s, int oh_n, int ow_n, bool channels_last,
                                        const T* __restrict__ x, T* __restrict__ y, int32_t* __restrict__ argmax) {
  const int64_t total = int64_t{s.batch} * s.channels * oh_n * ow_n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const Position out = split(i, s.channels, oh_n, ow_n, channels_last);
    float best = -INFINITY;
    int32_t best_at = -1;
    for (int r = 0; r < s.window; ++r) {
      const int ih = out.h * s.stride - s.pad + r;
      if (ih < 0 || ih >= s.in_h) continue;
      for (int q = 0; q < s.window; ++q) {
        const int iw = out.w * s.stride - s.pad + q;
        if (iw < 0 || iw >= s.in_w) continue;
        const float v = load(x, join({out.n, out.c, ih, iw}, s.channels, s.in_h, s.in_w, channels_last));
        if (best_at < 0 || v > best) {
          best = v;
          best_at = ih * s.in_w + iw;
        }
      }
    }
    store(y, i, best);
    argmax[i] = best_at;
  }
}

// Each input element sums dy over the outputs whose window covers it and chose it.
// (oh_n, ow_n: the output extents, computed on the host.)
template <typename T>
__global__ void max_pool_backward_kernel(cpu::PoolShape s, int oh_n, int ow_n, bool channels_last,
                                         const T* __restrict__ dy, const int32_t* __restrict__ argmax,
                                         T* __restrict__ dx) {
  const int64_t total = int64_t{s.batch} * s.channels * s.in_h * s.in_w;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const Position in = split(i, s.channels, s.in_h, s.in_w, channels_last);
    const int32_t self = in.h * s.in_w + in.w;
    // Outputs oh with oh*stride - pad <= h < oh*stride - pad + window.
    const int oh_first = max(0, (in.h + s.pad - s.window + s.stride) / s.stride);
    const int oh_last = min(oh_n - 1, (in.h + s.pad) / s.stride);
    const int ow_first = max(0, (in.w + s.pad - s.window + s.stride) / s.stride);
    const int ow_last = min(ow_n - 1, (in.w + s.pad) / s.stride);
    float sum = 0.0f;
    for (int oh = oh_first; oh <= oh_last; ++oh) {
      for (int ow = ow_first; ow <= ow_last; ++ow) {
        const int64_t o = join({in.n, in.c, oh, ow}, s.channels, oh_n, ow_n, channels_last);
        if (argmax[o] == self) sum += load(dy, o);
      }
    }
    store(dx, i, sum);
  }
}

// One thread per (image, channel); in NHWC neighbouring threads read neighbouring channels.
template <typename T>
__global__ void global_avg_pool_forward_kernel(int batch, int channels, int64_t spatial, bool channels_last,
                                               const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = int64_t{batch} * channels;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / channels, c = i % channels;
    const int64_t base = channels_last ? n * spatial * channels + c : i * spatial;
    const int64_t step = channels_last ? channels : 1;
    float sum = 0.0f;
    for (int64_t p = 0; p < spatial; ++p) sum += load(x, base + p * step);
    store(y, i, sum / static_cast<float>(spatial));
  }
}

template <typename T>
__global__ void global_avg_pool_backward_kernel(int channels, int64_t spatial, int64_t total, bool channels_last,
                                                const T* __restrict__ dy, T* __restrict__ dx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / (channels * spatial);
    const int64_t c = channels_last ? i % channels : i / spatial % channels;
    store(dx, i, load(dy, n * channels + c) / static_cast<float>(spatial));
  }
}

// NHWC bf16 with channels a multiple of 8 (ResNet's stem pool): one thread per position and 8
// channels, one 16-byte load per window tap. Same window order, tie rule and summation order as
// the kernels above, so the results are bit-identical to theirs. A thread's vector index splits
// like an NHWC element index with C / 8 channel groups (split: 32-bit divisions where it fits).
constexpr int kPoolVec = runtime::cuda::kBf16x8;

__global__ void max_pool_forward_vec_kernel(cpu::PoolShape s, int oh_n, int ow_n, const __nv_bfloat16* __restrict__ x,
                                            __nv_bfloat16* __restrict__ y, int32_t* __restrict__ argmax) {
  const int groups = s.channels / kPoolVec;
  const int64_t total = int64_t{s.batch} * oh_n * ow_n * groups;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const Position o_at = split(i, groups, oh_n, ow_n, true);  // o_at.c: the channel group
    const int g = o_at.c, oh = o_at.h, ow = o_at.w;
    const int64_t n = o_at.n;
    float best[kPoolVec], v[kPoolVec];
    int32_t best_at[kPoolVec];
#pragma unroll
    for (int k = 0; k < kPoolVec; ++k) {
      best[k] = -INFINITY;
      best_at[k] = -1;
    }
    for (int r = 0; r < s.window; ++r) {
      const int ih = oh * s.stride - s.pad + r;
      if (ih < 0 || ih >= s.in_h) continue;
      for (int q = 0; q < s.window; ++q) {
        const int iw = ow * s.stride - s.pad + q;
        if (iw < 0 || iw >= s.in_w) continue;
        runtime::cuda::load_bf16x8(x + ((n * s.in_h + ih) * s.in_w + iw) * s.channels + g * kPoolVec, v);
        const int32_t at = ih * s.in_w + iw;
#pragma unroll
        for (int k = 0; k < kPoolVec; ++k) {
          if (best_at[k] < 0 || v[k] > best[k]) {
            best[k] = v[k];
            best_at[k] = at;
          }
        }
      }
    }
    const int64_t o = i * kPoolVec;  // NHWC: (n, oh, ow, channel 8g) is element 8i
    runtime::cuda::store_bf16x8(y + o, best);
    int4* out = reinterpret_cast<int4*>(argmax + o);
    out[0] = make_int4(best_at[0], best_at[1], best_at[2], best_at[3]);
    out[1] = make_int4(best_at[4], best_at[5], best_at[6], best_at[7]);
  }
}

__global__ void max_pool_backward_vec_kernel(cpu::PoolShape s, int oh_n, int ow_n, const __nv_bfloat16* __restrict__ dy,
                                             const int32_t* __restrict__ argmax, __nv_bfloat16* __restrict__ dx) {
  const int groups = s.channels / kPoolVec;
  const int64_t total = int64_t{s.batch} * s.in_h * s.in_w * groups;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const Position in = split(i, groups, s.in_h, s.in_w, true);  // in.c: the channel group
    const int g = in.c, h = in.h, w = in.w;
    const int64_t n = in.n;
    const int32_t self = h * s.in_w + w;
    const int oh_first = max(0, (h + s.pad - s.window + s.stride) / s.stride);
    const int oh_last = min(oh_n - 1, (h + s.pad) / s.stride);
    const int ow_first = max(0, (w + s.pad - s.window + s.stride) / s.stride);
    const int ow_last = min(ow_n - 1, (w + s.pad) / s.stride);
    float sum[kPoolVec] = {}, g_dy[kPoolVec];
    for (int oh = oh_first; oh <= oh_last; ++oh) {
      for (int ow = ow_first; ow <= ow_last; ++ow) {
        const int64_t o = ((n * oh_n + oh) * ow_n + ow) * s.channels + g * kPoolVec;
        const int4 a0 = reinterpret_cast<const int4*>(argmax + o)[0];
        const int4 a1 = reinterpret_cast<const int4*>(argmax + o)[1];
        const int32_t chose[kPoolVec] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        runtime::cuda::load_bf16x8(dy + o, g_dy);
#pragma unroll
        for (int k = 0; k < kPoolVec; ++k) {
          if (chose[k] == self) sum[k] += g_dy[k];
        }
      }
    }
    runtime::cuda::store_bf16x8(dx + i * kPoolVec, sum);
  }
}

// Whether the 8-channel kernels take this call.
template <typename T>
bool vectorizable(const cpu::PoolShape& shape, bool channels_last, std::initializer_list<const void*> pointers) {
  if constexpr (!std::is_same_v<T, runtime::bfloat16>) {
    return false;
  } else {
    return channels_last && shape.channels % kPoolVec == 0 && runtime::cuda::aligned16(pointers);
  }
}

}  // namespace

template <typename T>
void max_pool_forward(cudaStream_t stream, const cpu::PoolShape& shape, bool channels_last, const T* x, T* y,
                      int32_t* argmax) {
  const int64_t n = int64_t{shape.batch} * shape.channels * shape.out_h() * shape.out_w();
  if (n == 0) return;
  using D = DeviceTypeOf<T>;
  if (vectorizable<T>(shape, channels_last, {x, y, argmax})) {
    const int64_t vectors = n / kPoolVec;
    launch_elementwise(max_pool_forward_vec_kernel, vectors, stream, "max pool forward", shape, shape.out_h(),
                       shape.out_w(), reinterpret_cast<const __nv_bfloat16*>(x), reinterpret_cast<__nv_bfloat16*>(y),
                       argmax);
    return;
  }
  launch_elementwise(max_pool_forward_kernel<D>, n, stream, "max pool forward", shape, shape.out_h(), shape.out_w(),
                     channels_last, reinterpret_cast<const D*>(x), reinterpret_cast<D*>(y), argmax);
}

template <typename T>
void max_pool_backward(cudaStream_t stream, const cpu::PoolShape& shape, bool channels_last, const T* dy,
                       const int32_t* argmax, T* dx) {
  const int64_t n = int64_t{shape.batch} * shape.channels * shape.in_h * shape.in_w;
  if (n == 0) return;
  using D = DeviceTypeOf<T>;
  if (vectorizable<T>(shape, channels_last, {dy, argmax, dx})) {
    const int64_t vectors = n / kPoolVec;
    launch_elementwise(max_pool_backward_vec_kernel, vectors, stream, "max pool backward", shape, shape.out_h(),
                       shape.out_w(), reinterpret_cast<const __nv_bfloat16*>(dy), argmax,
                       reinterpret_cast<__nv_bfloat16*>(dx));
    return;
  }
  launch_elementwise(max_pool_backward_kernel<D>, n, stream, "max pool backward", shape, shape.out_h(), shape.out_w(),
                     channels_last, reinterpret_cast<const D*>(dy), argmax, reinterpret_cast<D*>(dx));
}

template <typename T>
void global_avg_pool_forward(cudaStream_t stream, int batch, int channels, int64_t spatial, bool channels_last,
                             const T* x, T* y) {
  const int64_t n = int64_t{batch} * channels;
  if (n == 0) return;
  using D = DeviceTypeOf<T>;
  launch_elementwise(global_avg_pool_forward_kernel<D>, n, stream, "global average pool forward", batch, channels,
                     spatial, channels_last, reinterpret_cast<const D*>(x), reinterpret_cast<D*>(y));
}

template <typename T>
void global_avg_pool_backward(cudaStream_t stream, int batch, int channels, int64_t spatial, bool channels_last,
                              const T* dy, T* dx) {
  const int64_t n = int64_t{batch} * channels * spatial;
  if (n == 0) return;
  using D = DeviceTypeOf<T>;
  launch_elementwise(global_avg_pool_backward_kernel<D>, n, stream, "global average pool backward", channels, spatial,
                     n, channels_last, reinterpret_cast<const D*>(dy), reinterpret_cast<D*>(dx));
}

#define DTRAIN_POOLING(T)                                                                                      \
  template void max_pool_forward<T>(cudaStream_t, const cpu::PoolShape&, bool, const T*, T*, int32_t*);        \
  template void max_pool_backward<T>(cudaStream_t, const cpu::PoolShape&, bool, const T*, const int32_t*, T*); \
  template void global_avg_pool_forward<T>(cudaStream_t, int, int, int64_t, bool, const T*, T*);               \
  template void global_avg_pool_backward<T>(cudaStream_t, int, int, int64_t, bool, const T*, T*);
DTRAIN_POOLING(float)
DTRAIN_POOLING(runtime::bfloat16)
#undef DTRAIN_POOLING

}  // namespace dtrain::models::cuda
