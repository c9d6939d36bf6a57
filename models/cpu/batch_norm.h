#pragma once
// Batch normalization over NCHW (statistics per channel over N, H, W), PyTorch's convention:
// training normalizes with the batch statistics (biased variance) and updates
//   running = (1 - momentum) * running + momentum * batch   (running_var takes the unbiased variance);
// eval normalizes with the running statistics. eps inside the square root.
#include <cstdint>

namespace dtrain::models::cpu {

struct BatchNormShape {
  int batch = 1;
  int channels = 1;
  int64_t spatial = 1;  // H * W
  double eps = 1e-5;
  double momentum = 0.1;
};

// Training forward. Saves per-channel mean and inverse std (for backward) and updates the running
// statistics. Equals batch_norm_moments, then batch_norm_normalize over this batch's count.
template <typename T>
void batch_norm_forward_train(const BatchNormShape& s, const T* x, const T* gamma, const T* beta, T* y, T* saved_mean,
                              T* saved_inv_std, T* running_mean, T* running_var);

// The two halves of the training forward, for synchronized BN (models/batch_stats_reducer.h),
// which merges the moments of a group's batches in between.
// Per channel, in double and in two passes (no cancellation): the mean and the centred sum of
// squares m2 of the batch * spatial values.
template <typename T>
void batch_norm_moments(const BatchNormShape& s, const T* x, double* mean, double* m2);
// Normalizes x with moments over `count` values (biased variance m2 / count; the running variance
// takes the unbiased m2 / (count - 1)), saves mean and inverse std, updates the running statistics.
template <typename T>
void batch_norm_normalize(const BatchNormShape& s, int64_t count, const double* mean, const double* m2, const T* x,
                          const T* gamma, const T* beta, T* y, T* saved_mean, T* saved_inv_std, T* running_mean,
                          T* running_var);

template <typename T>
void batch_norm_forward_eval(const BatchNormShape& s, const T* x, const T* gamma, const T* beta, const T* running_mean,
                             const T* running_var, T* y);

// Backward of the training forward: dx, and dgamma / dbeta (overwritten).
template <typename T>
void batch_norm_backward(const BatchNormShape& s, const T* x, const T* dy, const T* gamma, const T* saved_mean,
                         const T* saved_inv_std, T* dx, T* dgamma, T* dbeta);

// The two halves of the backward, for synchronized BN, which adds the sums over the group in
// between. Per channel, in double: sum(dy) and sum(dy * xhat) of this batch.
template <typename T>
void batch_norm_backward_sums(const BatchNormShape& s, const T* x, const T* dy, const T* saved_mean,
                              const T* saved_inv_std, double* sum_dy, double* sum_dy_xhat);
// dx from the sums over `count` values (the values whose statistics the forward normalized with):
// dx = gamma * inv_std / count * (count * dy - sum(dy) - xhat * sum(dy * xhat)).
template <typename T>
void batch_norm_backward_dx(const BatchNormShape& s, int64_t count, const T* x, const T* dy, const T* gamma,
                            const T* saved_mean, const T* saved_inv_std, const double* sum_dy,
                            const double* sum_dy_xhat, T* dx);

}  // namespace dtrain::models::cpu
