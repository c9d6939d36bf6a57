#include "models/cpu/batch_norm.h"

#include <cmath>
#include <vector>

namespace dtrain::models::cpu {

template <typename T>
void batch_norm_forward_train(const BatchNormShape& s, const T* x, const T* gamma, const T* beta, T* y, T* saved_mean,
                              T* saved_inv_std, T* running_mean, T* running_var) {
  const int64_t per_channel = int64_t{s.batch} * s.spatial;
  for (int c = 0; c < s.channels; ++c) {
    // Two passes in double: the mean, then the centred sum of squares (no cancellation).
    double sum = 0;
    for (int n = 0; n < s.batch; ++n) {
      const T* xc = x + (int64_t{n} * s.channels + c) * s.spatial;
      for (int64_t i = 0; i < s.spatial; ++i) sum += xc[i];
    }
    const double mean = sum / static_cast<double>(per_channel);
    double squares = 0;
    for (int n = 0; n < s.batch; ++n) {
      const T* xc = x + (int64_t{n} * s.channels + c) * s.spatial;
      for (int64_t i = 0; i < s.spatial; ++i) squares += (xc[i] - mean) * (xc[i] - mean);
    }
    const double var = squares / static_cast<double>(per_channel);
    const double inv_std = 1.0 / std::sqrt(var + s.eps);
    const T scale = static_cast<T>(gamma[c] * inv_std);
    const T shift = static_cast<T>(beta[c] - mean * gamma[c] * inv_std);
    for (int n = 0; n < s.batch; ++n) {
      const int64_t at = (int64_t{n} * s.channels + c) * s.spatial;
      for (int64_t i = 0; i < s.spatial; ++i) y[at + i] = x[at + i] * scale + shift;
    }
    saved_mean[c] = static_cast<T>(mean);
    saved_inv_std[c] = static_cast<T>(inv_std);
    const double unbiased = per_channel > 1 ? squares / static_cast<double>(per_channel - 1) : var;
    running_mean[c] = static_cast<T>((1 - s.momentum) * running_mean[c] + s.momentum * mean);
    running_var[c] = static_cast<T>((1 - s.momentum) * running_var[c] + s.momentum * unbiased);
  }
}

template <typename T>
void batch_norm_forward_eval(const BatchNormShape& s, const T* x, const T* gamma, const T* beta, const T* running_mean,
                             const T* running_var, T* y) {
  for (int c = 0; c < s.channels; ++c) {
    const double inv_std = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + s.eps);
    const T scale = static_cast<T>(gamma[c] * inv_std);
    const T shift = static_cast<T>(beta[c] - running_mean[c] * gamma[c] * inv_std);
    for (int n = 0; n < s.batch; ++n) {
      const int64_t at = (int64_t{n} * s.channels + c) * s.spatial;
      for (int64_t i = 0; i < s.spatial; ++i) y[at + i] = x[at + i] * scale + shift;
    }
  }
}

template <typename T>
void batch_norm_backward(const BatchNormShape& s, const T* x, const T* dy, const T* gamma, const T* saved_mean,
                         const T* saved_inv_std, T* dx, T* dgamma, T* dbeta) {
  const double m = static_cast<double>(int64_t{s.batch} * s.spatial);
  for (int c = 0; c < s.channels; ++c) {
    const double mean = saved_mean[c];
    const double inv_std = saved_inv_std[c];
    double sum_dy = 0;
    double sum_dy_xhat = 0;
    for (int n = 0; n < s.batch; ++n) {
      const int64_t at = (int64_t{n} * s.channels + c) * s.spatial;
      for (int64_t i = 0; i < s.spatial; ++i) {
        sum_dy += dy[at + i];
        sum_dy_xhat += dy[at + i] * (x[at + i] - mean) * inv_std;
      }
    }
    dgamma[c] = static_cast<T>(sum_dy_xhat);
    dbeta[c] = static_cast<T>(sum_dy);
    // dx = gamma * inv_std / m * (m * dy - sum(dy) - xhat * sum(dy * xhat))
    const double k = gamma[c] * inv_std / m;
    for (int n = 0; n < s.batch; ++n) {
      const int64_t at = (int64_t{n} * s.channels + c) * s.spatial;
      for (int64_t i = 0; i < s.spatial; ++i) {
        const double xhat = (x[at + i] - mean) * inv_std;
        dx[at + i] = static_cast<T>(k * (m * dy[at + i] - sum_dy - xhat * sum_dy_xhat));
      }
    }
  }
}

#define DTRAIN_INSTANTIATE(T)                                                                                         \
  template void batch_norm_forward_train<T>(const BatchNormShape&, const T*, const T*, const T*, T*, T*, T*, T*, T*); \
  template void batch_norm_forward_eval<T>(const BatchNormShape&, const T*, const T*, const T*, const T*, const T*,   \
                                           T*);                                                                       \
  template void batch_norm_backward<T>(const BatchNormShape&, const T*, const T*, const T*, const T*, const T*, T*,   \
                                       T*, T*);
DTRAIN_INSTANTIATE(float)
DTRAIN_INSTANTIATE(double)
#undef DTRAIN_INSTANTIATE

}  // namespace dtrain::models::cpu
