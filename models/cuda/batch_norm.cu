#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "models/cuda/batch_norm.h"
#include "models/cuda/batch_norm_passes.cuh"
#include "models/cuda/batch_norm_vectors.cuh"
#include "models/cuda/moments.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_elements.cuh"
#include "runtime/cuda/resident_grid.h"
#include "runtime/memory/buffer.h"

namespace dtrain::models::cuda {
namespace {

using namespace batch_norm_detail;  // the vector widths and the passes over them
using runtime::cuda::aligned16;
using runtime::cuda::DeviceTypeOf;
using runtime::cuda::kernel_address;
using runtime::cuda::one_wave_grid;
using runtime::cuda::resident_blocks;

// The finalize kernels: a block is kFinalizeChannels channels x kFinalizeLanes lanes; lane r takes
// row blocks r, r + kFinalizeLanes, ... in order, kFinalizeLoads of them loaded before it merges
// any, and then the lanes merge in a fixed tree (deterministic). The loads' latency is what bounds
// these kernels: with 32 lanes and one load per merge, a 64-channel layer's ~660 row blocks took
// 21 dependent round trips, ~14 us a layer, 0.62 ms a step on an H200
// (bench/results/2026-11-25_h200/kernel_profile). Eight channels a block spread narrow layers over
// more SMs; a warp still reads whole 128-byte rows of partials.
constexpr int kFinalizeChannels = 8, kFinalizeLanes = 128, kFinalizeLoads = 8;

// A channel's moments as sums about a center K (row block 0's mean, the same for every lane):
// count, sum of n_b (mean_b - K), and sum of M2_b + n_b (mean_b - K)^2 over row blocks b. Merging is
// adding, where Chan's merge takes a double division each time, which made the forward finalize
// twice the backward's ~4 us. No less exact: K lies within a row block's spread of the channel's
// mean, so the M2 = Q - S^2 / N at the end cancels little, whatever the mean's size.
struct CenteredSums {
  double n, s, q;
};
__device__ inline void add(CenteredSums& a, const CenteredSums& b) {
  a.n += b.n;
  a.s += b.s;
  a.q += b.q;
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
  CenteredSums sums{0, 0, 0};
  double center = 0;
  if (c < channels) {
    center = partials[c].mean;
    for (int b0 = lane_r; b0 < row_blocks; b0 += kFinalizeLanes * kFinalizeLoads) {
      Moments p[kFinalizeLoads];
#pragma unroll
      for (int k = 0; k < kFinalizeLoads; ++k) {
        const int b = b0 + k * kFinalizeLanes;
        p[k] = b < row_blocks ? partials[int64_t{b} * channels + c] : Moments{0, 0, 0};
      }
#pragma unroll
      for (int k = 0; k < kFinalizeLoads; ++k) {
        const double n = static_cast<double>(p[k].n), d = p[k].mean - center;
        add(sums, CenteredSums{n, n * d, p[k].m2 + n * d * d});
      }
    }
  }
  __shared__ CenteredSums shared[kFinalizeChannels * kFinalizeLanes];
  shared[threadIdx.x] = sums;
  __syncthreads();
  for (int stride = kFinalizeLanes / 2; stride > 0; stride /= 2) {
    if (lane_r < stride) add(shared[threadIdx.x], shared[threadIdx.x + stride * kFinalizeChannels]);
    __syncthreads();
  }
  if (lane_r != 0 || c >= channels) return;
  const CenteredSums merged = shared[threadIdx.x];
  const double offset = merged.s / merged.n;  // the mean's distance from the center
  const double mean = center + offset, m2 = fmax(0.0, merged.q - merged.s * offset);
  if (local != nullptr) {
    local[c] = mean;
    local[channels + c] = m2;
    return;
  }
  write_statistics(c, merged.n, mean, m2, gamma, beta, eps, momentum, saved_mean, saved_inv_std, running_mean,
                   running_var, scale, shift);
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
    for (int b0 = lane_r; b0 < row_blocks; b0 += kFinalizeLanes * kFinalizeLoads) {
      float2 p[kFinalizeLoads];
#pragma unroll
      for (int k = 0; k < kFinalizeLoads; ++k) {
        const int b = b0 + k * kFinalizeLanes;
        p[k] = b < row_blocks ? partials[int64_t{b} * channels + c] : make_float2(0, 0);
      }
#pragma unroll
      for (int k = 0; k < kFinalizeLoads; ++k) {
        sum_dy += p[k].x;
        sum_dy_xhat += p[k].y;
      }
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
// The launch of a reduction pass: channel blocks of V's slots x row blocks, as many row blocks as
// fill the GPU in one wave (resident_blocks of the kernel), each thread with at least
// V::kRowsPerThread row vectors.
struct ReductionGrid {
  dim3 grid;
  int row_blocks;
};
template <typename V>
ReductionGrid reduction_grid(const V& v, const void* kernel) {
  const int channel_blocks = (v.channels() / V::kChannels + v.slots - 1) / v.slots;
  const int row_lanes = kThreads / v.slots;
  const int64_t want = std::max<int64_t>(1, resident_blocks(kernel, kThreads) / channel_blocks);
  const int row_blocks = static_cast<int>(std::clamp<int64_t>(v.rows / (row_lanes * V::kRowsPerThread), 1, want));
  return {dim3(channel_blocks, row_blocks), row_blocks};
}

// Calls run(vectors) with the widest Vectors that the layout, the sizes and the alignment of the
// activations allow (8 bf16 channels, 4 fp32 positions, else one element). The 8-wide path also
// reads `channel_arrays` (per-channel statistics) 16 bytes at a time.
template <typename D, typename Run>
void with_widest_vectors(const BatchNormDims& d, std::initializer_list<const void*> activations,
                         std::initializer_list<const void*> channel_arrays, Run run) {
  if constexpr (std::is_same_v<D, __nv_bfloat16>) {
    if (d.channels_last && d.channels % 8 == 0 && aligned16(activations) && aligned16(channel_arrays)) {
      return run(Vectors<D, 8>::of(d));
    }
  } else if constexpr (std::is_same_v<D, float>) {
    if (!d.channels_last && d.spatial % 4 == 0 && fits_32_bits(d) && aligned16(activations)) {
      return run(Vectors<D, 4>::of(d));
    }
  }
  run(Vectors<D, 1>::of(d));
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

// The grid of an element-wise pass over `vectors` vectors: one wave, or fewer blocks where a
// thread still gets V::kPerIteration vectors. With a FixedChannelWalk, a multiple of `period`
// blocks, the fewest whose stride (blocks x kThreads x kWidth elements) is a multiple of C, so that
// each thread's vectors are all of one channel group. A C that divides 2048 (64, ..., 2048) has a
// period of 1; a C with a large odd factor can leave as little as half a wave (a period just over
// half a wave) or take more than a wave (a period past one; slower, still correct).
template <typename V>
unsigned elementwise_grid(const void* kernel, int64_t vectors, int channels) {
  const unsigned grid = one_wave_grid(kernel, kThreads, (vectors + V::kPerIteration - 1) / V::kPerIteration);
  if constexpr (!V::Walk::kFixed) return grid;
  const int64_t period = channels / std::gcd<int64_t>(channels, int64_t{kThreads} * V::kWidth);
  return static_cast<unsigned>(grid >= period ? grid / period * period : period);
}

// The normalization of n elements with per-channel scale and shift (mask: null for none).
template <typename V>
void launch_apply(const V& v, cudaStream_t stream, int64_t n, const void* x, const float* scale, const float* shift,
                  const void* residual, bool relu, void* y, void* relu_mask) {
  using E = typename V::Element;
  const int64_t vectors = n / V::kWidth;
  const unsigned grid = elementwise_grid<V>(kernel_address(apply_kernel<V>), vectors, v.channels());
  apply_kernel<V><<<grid, kThreads, 0, stream>>>(v, vectors, static_cast<const E*>(x), scale, shift,
                                                 static_cast<const E*>(residual), relu, static_cast<E*>(y),
                                                 static_cast<typename V::MaskWord*>(relu_mask));
}

// Per-call scratch, a device Buffer on `stream` (from the caching allocator; its reuse after
// release is ordered on the same stream): `per_channel` floats of coefficients per channel first
// (16-byte aligned for the vector loads), then row_blocks x C partials, then `exchanged` doubles
// for synchronized BN (the 16- or 8-byte partials keep them 8-byte aligned).
template <typename Partial>
struct Scratch {
  runtime::Buffer buffer;
  float* coefficients;
  Partial* partials;
  double* exchanged;  // null when none
};
template <typename Partial>
Scratch<Partial> scratch(cudaStream_t stream, int channels, int per_channel, int row_blocks, size_t exchanged) {
  const size_t coefficient_bytes = (per_channel * sizeof(float) * channels + 15) / 16 * 16;
  const size_t partial_bytes = sizeof(Partial) * size_t(row_blocks) * channels;
  runtime::Buffer buffer(runtime::MemoryKind::kDevice, coefficient_bytes + partial_bytes + sizeof(double) * exchanged,
                         stream);
  char* bytes = static_cast<char*>(buffer.data());
  return {std::move(buffer), reinterpret_cast<float*>(bytes), reinterpret_cast<Partial*>(bytes + coefficient_bytes),
          exchanged > 0 ? reinterpret_cast<double*>(bytes + coefficient_bytes + partial_bytes) : nullptr};
}

// The arguments of batch_norm_forward_train, activations in the device type.
struct ForwardTrain {
  const void* x;
  const float *gamma, *beta;
  const void* residual;
  bool relu;
  void* y;
  float *saved_mean, *saved_inv_std, *running_mean, *running_var;
  uint8_t* relu_mask;
};

template <typename V>
void forward_train(const V& v, cudaStream_t stream, const BatchNormDims& d, const ForwardTrain& a,
                   BatchStatsReducer* group) {
  const ReductionGrid launch = reduction_grid(v, kernel_address(partial_moments_kernel<V>));
  const int64_t rows = int64_t{d.batch} * d.spatial;
  const bool sync = synchronizes(group);
  // Scale and shift, the partials, and (sync) the exchanged moments: mean and M2 per channel.
  const size_t exchanged = sync ? 2 * size_t(d.channels) : 0;
  const Scratch<Moments> s = scratch<Moments>(stream, d.channels, 2, launch.row_blocks, exchanged);
  float* scale = s.coefficients;
  float* shift = scale + d.channels;
  Moments* partials = s.partials;
  double* moments = s.exchanged;
  partial_moments_kernel<V>
      <<<launch.grid, kThreads, 0, stream>>>(v, static_cast<const typename V::Element*>(a.x), partials);
  finalize_forward_kernel<<<(d.channels + kFinalizeChannels - 1) / kFinalizeChannels,
                            kFinalizeChannels * kFinalizeLanes, 0, stream>>>(
      d.channels, launch.row_blocks, partials, a.gamma, a.beta, d.eps, d.momentum, a.saved_mean, a.saved_inv_std,
      a.running_mean, a.running_var, scale, shift, moments);
  if (sync) {
    int64_t group_rows = 0;
    round_trip(stream, moments, exchanged, exchanged, [&](std::vector<double>& host) {
      group_rows = merge_moments_over_group(*group, d.channels, rows, host.data(), host.data() + d.channels);
    });
    group_statistics_kernel<<<(d.channels + 127) / 128, 128, 0, stream>>>(
        d.channels, static_cast<double>(group_rows), moments, a.gamma, a.beta, d.eps, d.momentum, a.saved_mean,
        a.saved_inv_std, a.running_mean, a.running_var, scale, shift);
  }
  launch_apply(v, stream, rows * d.channels, a.x, scale, shift, a.residual, a.relu, a.y,
               a.relu ? a.relu_mask : nullptr);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm forward kernels";
}

// The arguments of batch_norm_backward, activations in the device type.
struct Backward {
  const void* x;
  const uint8_t* relu_mask;
  const void* dy;
  const float *gamma, *saved_mean, *saved_inv_std;
  bool relu;
  void *dx, *dresidual;
  float *dgamma, *dbeta;
};

// Synchronized BN's backward exchange: sums[2C, 4C) = the group's sums[0, 2C) (sum(dy') and
// sum(dy' * xhat)); returns the group's row count.
double exchange_backward_sums(cudaStream_t stream, BatchStatsReducer& group, double* sums, size_t local, int64_t rows) {
  double group_rows = 0;
  round_trip(stream, sums, local, 2 * local, [&](std::vector<double>& host) {
    // [sum(dy') | sum(dy' * xhat) | rows] added over the group, after this rank's own sums.
    std::vector<double> group_sums(host.begin(), host.begin() + static_cast<long>(local));
    group_sums.push_back(static_cast<double>(rows));
    sum_over_group(group, group_sums.data(), group_sums.size());
    std::copy(group_sums.begin(), group_sums.begin() + static_cast<long>(local),
              host.begin() + static_cast<long>(local));
    group_rows = group_sums.back();
  });
  return group_rows;
}

template <typename V>
void backward(const V& v, cudaStream_t stream, const BatchNormDims& d, const Backward& a, BatchStatsReducer* group) {
  using E = typename V::Element;
  const ReductionGrid launch = reduction_grid(v, kernel_address(backward_partials_kernel<V>));
  const int64_t rows = int64_t{d.batch} * d.spatial;
  const bool sync = synchronizes(group);
  // k, a, b per channel, the partials, and (sync) the exchanged sums: this rank's, then the group's.
  const size_t local = sync ? 2 * size_t(d.channels) : 0;
  const Scratch<float2> s = scratch<float2>(stream, d.channels, 3, launch.row_blocks, 2 * local);
  float* coefficients = s.coefficients;
  float2* partials = s.partials;
  double* sums = s.exchanged;
  const E* x = static_cast<const E*>(a.x);
  const E* dy = static_cast<const E*>(a.dy);
  backward_partials_kernel<V>
      <<<launch.grid, kThreads, 0, stream>>>(v, x, a.relu_mask, dy, a.relu, a.saved_mean, a.saved_inv_std, partials);
  finalize_backward_kernel<<<(d.channels + kFinalizeChannels - 1) / kFinalizeChannels,
                             kFinalizeChannels * kFinalizeLanes, 0, stream>>>(
      d.channels, launch.row_blocks, static_cast<double>(rows), partials, a.gamma, a.saved_inv_std, a.dgamma, a.dbeta,
      coefficients, sums);
  if (sync) {
    const double group_rows = exchange_backward_sums(stream, *group, sums, local, rows);
    group_backward_kernel<<<(d.channels + 127) / 128, 128, 0, stream>>>(
        d.channels, group_rows, sums, a.gamma, a.saved_inv_std, a.dgamma, a.dbeta, coefficients);
  }
  const int64_t vectors = rows * d.channels / V::kWidth;
  const unsigned grid = elementwise_grid<V>(kernel_address(backward_apply_kernel<V>), vectors, d.channels);
  backward_apply_kernel<V><<<grid, kThreads, 0, stream>>>(v, vectors, x, a.relu_mask, dy, a.relu, a.saved_mean,
                                                          a.saved_inv_std, coefficients, static_cast<E*>(a.dx),
                                                          static_cast<E*>(a.dresidual));
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm backward kernels";
}

}  // namespace

template <typename T>
void batch_norm_forward_train(cudaStream_t stream, const BatchNormDims& d, const T* x, const float* gamma,
                              const float* beta, const T* residual, bool relu, T* y, float* saved_mean,
                              float* saved_inv_std, float* running_mean, float* running_var, uint8_t* relu_mask,
                              BatchStatsReducer* group) {
  check_dims(d);
  DTRAIN_CHECK(!relu || (relu_mask != nullptr && reinterpret_cast<uintptr_t>(relu_mask) % 4 == 0))
      << "batch norm forward with ReLU needs a 4-byte aligned mask of relu_mask_bytes(elements) bytes";
  const ForwardTrain args{x,          gamma,         beta,         residual,    relu,     y,
                          saved_mean, saved_inv_std, running_mean, running_var, relu_mask};
  with_widest_vectors<DeviceTypeOf<T>>(d, {x, residual, y}, {},
                                       [&](const auto& v) { forward_train(v, stream, d, args, group); });
}

template <typename T>
void batch_norm_forward_eval(cudaStream_t stream, const BatchNormDims& d, const T* x, const float* gamma,
                             const float* beta, const float* running_mean, const float* running_var, const T* residual,
                             bool relu, T* y) {
  check_dims(d);
  runtime::Buffer scratch(runtime::MemoryKind::kDevice, 2 * sizeof(float) * d.channels, stream);
  float* scale = static_cast<float*>(scratch.data());
  float* shift = scale + d.channels;
  eval_coefficients_kernel<<<(d.channels + 127) / 128, 128, 0, stream>>>(d.channels, gamma, beta, running_mean,
                                                                         running_var, d.eps, scale, shift);
  const int64_t n = int64_t{d.batch} * d.spatial * d.channels;
  with_widest_vectors<DeviceTypeOf<T>>(d, {x, residual, y}, {shift}, [&](const auto& v) {
    launch_apply(v, stream, n, x, scale, shift, residual, relu, y, nullptr);
  });
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "batch norm eval kernels";
}

template <typename T>
void batch_norm_backward(cudaStream_t stream, const BatchNormDims& d, const T* x, const uint8_t* relu_mask, const T* dy,
                         const float* gamma, const float* saved_mean, const float* saved_inv_std, bool relu, T* dx,
                         T* dresidual, float* dgamma, float* dbeta, BatchStatsReducer* group) {
  check_dims(d);
  DTRAIN_CHECK(!relu || relu_mask != nullptr) << "batch norm backward with ReLU needs the forward's ReLU mask";
  const Backward args{x, relu_mask, dy, gamma, saved_mean, saved_inv_std, relu, dx, dresidual, dgamma, dbeta};
  with_widest_vectors<DeviceTypeOf<T>>(d, {x, dy, dx, dresidual}, {saved_mean, saved_inv_std},
                                       [&](const auto& v) { backward(v, stream, d, args, group); });
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
