#include <algorithm>

#include "models/cuda/batch_norm.h"
#include "runtime/core/buffer.h"
#include "runtime/core/cuda/cuda_check.h"
#include "runtime/core/cuda/device_elements.cuh"

namespace dtrain::models::cuda {
namespace {

using core::cuda::DeviceTypeOf;
using core::cuda::load;
using core::cuda::store;

// Rows are the (n, h, w) positions: M = batch * spatial of them per channel. Element (row, c):
// NHWC: row * C + c. NCHW: (n * C + c) * S + s with n = row / S, s = row % S.
struct Indexer {
  int channels;
  int64_t spatial;
  bool channels_last;
  __device__ int64_t operator()(int64_t row, int c) const {
    if (channels_last) return row * channels + c;
    return (row / spatial * channels + c) * spatial + row % spatial;
  }
  __device__ int channel_of(int64_t i) const {
    return channels_last ? static_cast<int>(i % channels) : static_cast<int>(i / spatial % channels);
  }
};

// The launch of a per-channel reduction over the rows. Block shape: 32 channels x 8 row-lanes for
// NHWC (the 32 threads of a warp read 32 adjacent channels), 1 channel x 256 row-lanes for NCHW
// (adjacent rows are adjacent). Row blocks: enough blocks in all to fill the GPU, each with at
// least a few hundred rows.
constexpr int kThreads = 256;
struct ReductionLaunch {
  Indexer ix;
  int64_t rows;
  int channels_per_block;
  int row_blocks;
  dim3 grid() const { return dim3((ix.channels + channels_per_block - 1) / channels_per_block, row_blocks); }
};
ReductionLaunch reduction_launch(const BatchNormDims& d) {
  ReductionLaunch launch{{d.channels, d.spatial, d.channels_last}, int64_t{d.batch} * d.spatial,
                         d.channels_last ? 32 : 1, 1};
  const int row_lanes = kThreads / launch.channels_per_block;
  const int channel_blocks = static_cast<int>(launch.grid().x);
  const int64_t want = std::max<int64_t>(1, 1024 / channel_blocks);
  launch.row_blocks = static_cast<int>(std::clamp<int64_t>(launch.rows / (row_lanes * 16), 1, want));
  return launch;
}

struct Moments {  // count, mean, centred sum of squares
  float n, mean, m2;
};
__device__ inline Moments merge(Moments a, Moments b) {
  const float n = a.n + b.n;
  if (n == 0) return a;
  const float delta = b.mean - a.mean;
  const float wb = b.n / n;
  return {n, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * a.n * wb};
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
      const float v = load(x, ix(r, c));
      m.n += 1;
      const float delta = v - m.mean;
      m.mean += delta / m.n;
      m.m2 += delta * (v - m.mean);
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

// One thread per channel: merges the partials in double, then the affine form of the
// normalization: y = x * scale + shift.
__global__ void finalize_forward_kernel(int channels, int row_blocks, const Moments* __restrict__ partials,
                                        const float* __restrict__ gamma, const float* __restrict__ beta, double eps,
                                        double momentum, float* __restrict__ saved_mean,
                                        float* __restrict__ saved_inv_std, float* __restrict__ running_mean,
                                        float* __restrict__ running_var, float* __restrict__ scale,
                                        float* __restrict__ shift) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  double n = 0, mean = 0, m2 = 0;
  for (int b = 0; b < row_blocks; ++b) {
    const Moments p = partials[int64_t{b} * channels + c];
    if (p.n == 0) continue;
    const double total = n + p.n;
    const double delta = p.mean - mean;
    mean += delta * p.n / total;
    m2 += p.m2 + delta * delta * n * p.n / total;
    n = total;
  }
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

__global__ void eval_coefficients_kernel(int channels, const float* __restrict__ gamma, const float* __restrict__ beta,
                                         const float* __restrict__ running_mean, const float* __restrict__ running_var,
                                         double eps, float* __restrict__ scale, float* __restrict__ shift) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const double inv_std = 1.0 / sqrt(static_cast<double>(running_var[c]) + eps);
  scale[c] = static_cast<float>(gamma[c] * inv_std);
  shift[c] = static_cast<float>(beta[c] - running_mean[c] * gamma[c] * inv_std);
}

template <typename T>
__global__ void apply_kernel(Indexer ix, int64_t n, const T* __restrict__ x, const float* __restrict__ scale,
                             const float* __restrict__ shift, const T* __restrict__ residual, bool relu,
                             T* __restrict__ y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int c = ix.channel_of(i);
    float v = load(x, i) * scale[c] + shift[c];
    if (residual != nullptr) v += load(residual, i);
    if (relu) v = fmaxf(v, 0.0f);
    store(y, i, v);
  }
}

// Backward partials per (row block, channel): sum of dy' and of dy' * xhat, dy' = dy through the
// ReLU mask (y > 0).
template <typename T>
__global__ void backward_partials_kernel(Indexer ix, int64_t rows, int channels_per_block, const T* __restrict__ x,
                                         const T* __restrict__ y, const T* __restrict__ dy, bool relu,
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
      if (relu && !(load(y, i) > 0.0f)) g = 0.0f;
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

// dgamma = sum(dy' * xhat), dbeta = sum(dy'); dx = k * (dy' - (dbeta + xhat * dgamma) / M) with
// k = gamma * inv_std, written as dx = dy' * k - (a + xhat * b) with a, b per channel.
__global__ void finalize_backward_kernel(int channels, int row_blocks, double rows, const float2* __restrict__ partials,
                                         const float* __restrict__ gamma, const float* __restrict__ inv_std,
                                         float* __restrict__ dgamma, float* __restrict__ dbeta,
                                         float* __restrict__ coefficients) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  double sum_dy = 0, sum_dy_xhat = 0;
  for (int b = 0; b < row_blocks; ++b) {
    sum_dy += partials[int64_t{b} * channels + c].x;
    sum_dy_xhat += partials[int64_t{b} * channels + c].y;
  }
  dgamma[c] = static_cast<float>(sum_dy_xhat);
  dbeta[c] = static_cast<float>(sum_dy);
  const double k = static_cast<double>(gamma[c]) * inv_std[c];
  coefficients[3 * c] = static_cast<float>(k);
  coefficients[3 * c + 1] = static_cast<float>(k * sum_dy / rows);
  coefficients[3 * c + 2] = static_cast<float>(k * sum_dy_xhat / rows);
}

template <typename T>
__global__ void backward_apply_kernel(Indexer ix, int64_t n, const T* __restrict__ x, const T* __restrict__ y,
                                      const T* __restrict__ dy, bool relu, const float* __restrict__ mean,
                                      const float* __restrict__ inv_std, const float* __restrict__ coefficients,
                                      T* __restrict__ dx, T* __restrict__ dresidual) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int c = ix.channel_of(i);
    float g = load(dy, i);
    if (relu && !(load(y, i) > 0.0f)) g = 0.0f;
    if (dresidual != nullptr) store(dresidual, i, g);
    const float xhat = (load(x, i) - mean[c]) * inv_std[c];
    store(dx, i, g * coefficients[3 * c] - coefficients[3 * c + 1] - xhat * coefficients[3 * c + 2]);
  }
}

int elementwise_blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 132 * 16));
}

void check_dims(const BatchNormDims& d) {
  DTRAIN_CHECK(d.batch > 0 && d.channels > 0 && d.spatial > 0 && d.eps > 0)
      << "batch norm: bad dims N=" << d.batch << " C=" << d.channels << " HxW=" << d.spatial << " eps=" << d.eps;
}

}  // namespace

// Per-call scratch (partials, per-channel coefficients) is a device Buffer on `stream`: it comes
// from the caching allocator, and its reuse after release is ordered on the same stream.
template <typename T>
void batch_norm_forward_train(cudaStream_t stream, const BatchNormDims& d, const T* x_host_type, const float* gamma,
                              const float* beta, const T* residual_host_type, bool relu, T* y_host_type,
                              float* saved_mean, float* saved_inv_std, float* running_mean, float* running_var) {
  using D = DeviceTypeOf<T>;
  check_dims(d);
  const D* x = reinterpret_cast<const D*>(x_host_type);
  const ReductionLaunch launch = reduction_launch(d);
  const size_t partial_bytes = sizeof(Moments) * size_t(launch.row_blocks) * d.channels;
  core::Buffer scratch(core::MemoryKind::kDevice, partial_bytes + 2 * sizeof(float) * d.channels, stream);
  Moments* partials = static_cast<Moments*>(scratch.data());
  float* scale = reinterpret_cast<float*>(static_cast<char*>(scratch.data()) + partial_bytes);
  float* shift = scale + d.channels;
  partial_moments_kernel<<<launch.grid(), kThreads, 0, stream>>>(launch.ix, launch.rows, launch.channels_per_block,
                                                                  x, partials);
  finalize_forward_kernel<<<(d.channels + 127) / 128, 128, 0, stream>>>(
      d.channels, launch.row_blocks, partials, gamma, beta, d.eps, d.momentum, saved_mean, saved_inv_std,
      running_mean, running_var, scale, shift);
  const int64_t n = launch.rows * d.channels;
  apply_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(launch.ix, n, x, scale, shift,
                                                               reinterpret_cast<const D*>(residual_host_type), relu,
                                                               reinterpret_cast<D*>(y_host_type));
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm forward kernels";
}

template <typename T>
void batch_norm_forward_eval(cudaStream_t stream, const BatchNormDims& d, const T* x_host_type, const float* gamma,
                             const float* beta, const float* running_mean, const float* running_var,
                             const T* residual_host_type, bool relu, T* y_host_type) {
  using D = DeviceTypeOf<T>;
  check_dims(d);
  core::Buffer scratch(core::MemoryKind::kDevice, 2 * sizeof(float) * d.channels, stream);
  float* scale = static_cast<float*>(scratch.data());
  float* shift = scale + d.channels;
  eval_coefficients_kernel<<<(d.channels + 127) / 128, 128, 0, stream>>>(d.channels, gamma, beta, running_mean,
                                                                         running_var, d.eps, scale, shift);
  const int64_t n = int64_t{d.batch} * d.spatial * d.channels;
  apply_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(
      Indexer{d.channels, d.spatial, d.channels_last}, n, reinterpret_cast<const D*>(x_host_type), scale, shift,
      reinterpret_cast<const D*>(residual_host_type), relu, reinterpret_cast<D*>(y_host_type));
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm eval kernels";
}

template <typename T>
void batch_norm_backward(cudaStream_t stream, const BatchNormDims& d, const T* x_host_type, const T* y_host_type,
                         const T* dy_host_type, const float* gamma, const float* saved_mean, const float* saved_inv_std,
                         bool relu, T* dx_host_type, T* dresidual_host_type, float* dgamma, float* dbeta) {
  using D = DeviceTypeOf<T>;
  check_dims(d);
  DTRAIN_CHECK(!relu || y_host_type != nullptr) << "batch norm backward with ReLU needs the forward output";
  const D* x = reinterpret_cast<const D*>(x_host_type);
  const D* y = reinterpret_cast<const D*>(y_host_type);
  const D* dy = reinterpret_cast<const D*>(dy_host_type);
  const ReductionLaunch launch = reduction_launch(d);
  const size_t partial_bytes = sizeof(float2) * size_t(launch.row_blocks) * d.channels;
  core::Buffer scratch(core::MemoryKind::kDevice, partial_bytes + 3 * sizeof(float) * d.channels, stream);
  float2* partials = static_cast<float2*>(scratch.data());
  float* coefficients = reinterpret_cast<float*>(static_cast<char*>(scratch.data()) + partial_bytes);
  backward_partials_kernel<<<launch.grid(), kThreads, 0, stream>>>(launch.ix, launch.rows,
                                                                    launch.channels_per_block, x, y, dy, relu,
                                                                    saved_mean, saved_inv_std, partials);
  finalize_backward_kernel<<<(d.channels + 127) / 128, 128, 0, stream>>>(
      d.channels, launch.row_blocks, static_cast<double>(launch.rows), partials, gamma, saved_inv_std, dgamma, dbeta,
      coefficients);
  const int64_t n = launch.rows * d.channels;
  backward_apply_kernel<<<elementwise_blocks(n), kThreads, 0, stream>>>(
      launch.ix, n, x, y, dy, relu, saved_mean, saved_inv_std, coefficients, reinterpret_cast<D*>(dx_host_type),
      reinterpret_cast<D*>(dresidual_host_type));
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm backward kernels";
}

#define DTRAIN_INSTANTIATE(T)                                                                                       \
  template void batch_norm_forward_train<T>(cudaStream_t, const BatchNormDims&, const T*, const float*,            \
                                            const float*, const T*, bool, T*, float*, float*, float*, float*);     \
  template void batch_norm_forward_eval<T>(cudaStream_t, const BatchNormDims&, const T*, const float*, const float*, \
                                           const float*, const float*, const T*, bool, T*);                        \
  template void batch_norm_backward<T>(cudaStream_t, const BatchNormDims&, const T*, const T*, const T*,           \
                                       const float*, const float*, const float*, bool, T*, T*, float*, float*);
DTRAIN_INSTANTIATE(float)
DTRAIN_INSTANTIATE(core::bfloat16)
#undef DTRAIN_INSTANTIATE

}  // namespace dtrain::models::cuda
