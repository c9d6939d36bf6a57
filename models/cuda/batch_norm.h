#pragma once
// Batch normalization on the GPU, with the fusions ResNet needs: BN, BN + ReLU, and
// BN + residual add + ReLU in one pass over the activations, forward and backward.
// Semantics are those of the CPU reference (models/cpu/batch_norm.h, PyTorch's): batch statistics
// with the biased variance for normalizing, the unbiased one for the running variance, eps inside
// the square root. Activations are fp32 NCHW or bf16 NHWC (runtime::bfloat16 on the host side);
// gamma, beta, statistics and parameter gradients are fp32.
//
// Statistics are reduced in two levels, both deterministic: blocks of rows write per-channel
// partials (count, mean, centred sum of squares; merged with Chan's formula, so no cancellation),
// and one thread per channel merges the partials in double. Work is queued on `stream`; scratch is
// a device Buffer on that stream (the current device's caching allocator).
//
// Synchronized BN (`group`, models/batch_stats_reducer.h, when it synchronizes): between the two
// levels the rank's per-channel statistics (forward: mean and M2; backward: sum(dy) and
// sum(dy * xhat)) go to the host, are exchanged over the group and come back, and the second level
// normalizes with the group's. That is a host round-trip: the host waits for `stream` there, in
// every BN layer's forward and backward (the cost of sync BN). dgamma and dbeta stay this rank's
// own sums (the gradient average over the ranks makes them the group's).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "models/batch_stats_reducer.h"
#include "models/cpu/batch_norm.h"

namespace dtrain::models::cuda {

// The CPU reference's shape (batch, channels, H * W, eps, momentum) and the activations' layout.
struct BatchNormDims : cpu::BatchNormShape {
  bool channels_last = false;  // NHWC (else NCHW)
};

// The bytes of a ReLU mask over `elements` activations: one bit each, in 32-bit words.
inline size_t relu_mask_bytes(int64_t elements) {
  return static_cast<size_t>((elements + 31) / 32 * 4);
}

// y = act(bn(x) [+ residual]); act is ReLU when relu. residual may be null. Writes saved_mean and
// saved_inv_std for backward and updates running_mean / running_var. With relu, also writes
// relu_mask (relu_mask_bytes(N*C*H*W) bytes, 4-byte aligned): bit i (byte i / 8, bit i % 8) says
// whether element i of y was kept, for backward, which then reads one bit instead of y.
template <typename T>
void batch_norm_forward_train(cudaStream_t stream, const BatchNormDims& dims, const T* x, const float* gamma,
                              const float* beta, const T* residual, bool relu, T* y, float* saved_mean,
                              float* saved_inv_std, float* running_mean, float* running_var, uint8_t* relu_mask,
                              BatchStatsReducer* group = nullptr);

// Inference: normalizes with the running statistics.
template <typename T>
void batch_norm_forward_eval(cudaStream_t stream, const BatchNormDims& dims, const T* x, const float* gamma,
                             const float* beta, const float* running_mean, const float* running_var, const T* residual,
                             bool relu, T* y);

// Backward of forward_train (with the same group). relu_mask is the forward's (null when !relu). Writes dx, dgamma
// and dbeta, and dresidual (the gradient reaching the residual input, i.e. dy through the ReLU) when it is not null.
template <typename T>
void batch_norm_backward(cudaStream_t stream, const BatchNormDims& dims, const T* x, const uint8_t* relu_mask,
                         const T* dy, const float* gamma, const float* saved_mean, const float* saved_inv_std,
                         bool relu, T* dx, T* dresidual, float* dgamma, float* dbeta,
                         BatchStatsReducer* group = nullptr);

}  // namespace dtrain::models::cuda
