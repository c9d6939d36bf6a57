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
// statistics.
template <typename T>
void batch_norm_forward_train(const BatchNormShape& s, const T* x, const T* gamma, const T* beta, T* y, T* saved_mean,
                              T* saved_inv_std, T* running_mean, T* running_var);

template <typename T>
void batch_norm_forward_eval(const BatchNormShape& s, const T* x, const T* gamma, const T* beta, const T* running_mean,
                             const T* running_var, T* y);

// Backward of the training forward: dx, and dgamma / dbeta (overwritten).
template <typename T>
void batch_norm_backward(const BatchNormShape& s, const T* x, const T* dy, const T* gamma, const T* saved_mean,
                         const T* saved_inv_std, T* dx, T* dgamma, T* dbeta);

}  // namespace dtrain::models::cpu
