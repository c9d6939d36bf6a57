#include "models/cpu/batch_norm.h"

#include <cmath>
#include <vector>

namespace dtrain::models::cpu {

template <typename T>
void batch_norm_moments(const BatchNormShape& s, const T* x, double* mean, double* m2) {
  const int64_t per_channel = int64_t{s.batch} * s.spatial;
  for (int c = 0; c < s.channels; ++c) {
    // Two passes in double: the mean, then the centred sum of squares (no cancellation).
    double sum = 0;
    for (int n = 0; n < s.batch; ++n) {
      const T* xc = x + (int64_t{n} * s.channels + c) * s.spatial;
      for (int64_t i = 0; i < s.spatial; ++i) sum += xc[i];
    }
    const double mu = sum / static_cast<double>(per_channel);
    double squares = 0;
    for (int n = 0; n < s.batch; ++n) {
      const T* xc = x + (int64_t{n} * s.channels + c) * s.spatial;
      for (int64_t i = 0; i < s.spatial; ++i) squares += (xc[i] - mu) * (xc[i] - mu);
    }
    mean[c] = mu;
    m2[c] = squares;
  }
}

template <typename T>
void batch_norm_normalize(const BatchNormShape& s, int64_t count, const double* mean, const double* m2, const T* x,
                          const T* gamma, const T* beta, T* y, T* saved_mean, T* saved_inv_std, T* running_mean,
                          T* running_var) {
  for (int c = 0; c < s.channels; ++c) {
    const double var = m2[c] / static_cast<double>(count);
    const double inv_std = 1.0 / std::sqrt(var + s.eps);
    const T scale = static_cast<T>(gamma[c] * inv_std);
    const T shift = static_cast<T>(beta[c] - mean[c] * gamma[c] * inv_std);
    for (int n = 0; n < s.batch; ++n) {
      const int64_t at = (int64_t{n} * s.channels + c) * s.spatial;
      for (int64_t i = 0; i < s.spatial; ++i) y[at + i] = x[at + i] * scale + shift;
    }
    saved_mean[c] = static_cast<T>(mean[c]);
    saved_inv_std[c] = static_cast<T>(inv_std);
    const double unbiased = count > 1 ? m2[c] / static_cast<double>(count - 1) : var;
    running_mean[c] = static_cast<T>((1 - s.momentum) * running_mean[c] + s.momentum * mean[c]);
    running_var[c] = static_cast<T>((1 - s.momentum) * running_var[c] + s.momentum * unbiased);
  }
}

template <typename T>
void batch_norm_forward_train(const BatchNormShape& s, const T* x, const T* gamma, const T* beta, T* y, T* saved_mean,
                              T* saved_inv_std, T* running_mean, T* running_var) {
  std::vector<double> mean(static_cast<size_t>(s.channels)), m2(static_cast<size_t>(s.channels));
  batch_norm_moments(s, x, mean.data(), m2.data());
  batch_norm_normalize(s, int64_t{s.batch} * s.spatial, mean.data(), m2.data(), x, gamma, beta, y, saved_mean,
                       saved_inv_std, running_mean, running_var);
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
void batch_norm_backward_sums(const BatchNormShape& s, const T* x, const T* dy, const T* saved_mean,
                              const T* saved_inv_std, double* sum_dy, double* sum_dy_xhat) {
  for (int c = 0; c < s.channels; ++c) {
    const double mean = saved_mean[c];
    const double inv_std = saved_inv_std[c];
    double a = 0;
    double b = 0;
    for (int n = 0; n < s.batch; ++n) {
      const int64_t at = (int64_t{n} * s.channels + c) * s.spatial;
      for (int64_t i = 0; i < s.spatial; ++i) {
        a += dy[at + i];
        b += dy[at + i] * (x[at + i] - mean) * inv_std;
      }
    }
    sum_dy[c] = a;
    sum_dy_xhat[c] = b;
  }
}

template <typename T>
void batch_norm_backward_dx(const BatchNormShape& s, int64_t count, const T* x, const T* dy, const T* gamma,
                            const T* saved_mean, const T* saved_inv_std, const double* sum_dy,
                            const double* sum_dy_xhat, T* dx) {
  const double m = static_cast<double>(count);
  for (int c = 0; c < s.channels; ++c) {
    const double mean = saved_mean[c];
    const double inv_std = saved_inv_std[c];
    const double k = gamma[c] * inv_std / m;
    for (int n = 0; n < s.batch; ++n) {
      const int64_t at = (int64_t{n} * s.channels + c) * s.spatial;
      for (int64_t i = 0; i < s.spatial; ++i) {
        const double xhat = (x[at + i] - mean) * inv_std;
        dx[at + i] = static_cast<T>(k * (m * dy[at + i] - sum_dy[c] - xhat * sum_dy_xhat[c]));
      }
    }
  }
}

template <typename T>
void batch_norm_backward(const BatchNormShape& s, const T* x, const T* dy, const T* gamma, const T* saved_mean,
                         const T* saved_inv_std, T* dx, T* dgamma, T* dbeta) {
  std::vector<double> sum_dy(static_cast<size_t>(s.channels)), sum_dy_xhat(static_cast<size_t>(s.channels));
  batch_norm_backward_sums(s, x, dy, saved_mean, saved_inv_std, sum_dy.data(), sum_dy_xhat.data());
  for (int c = 0; c < s.channels; ++c) {
    dgamma[c] = static_cast<T>(sum_dy_xhat[static_cast<size_t>(c)]);
    dbeta[c] = static_cast<T>(sum_dy[static_cast<size_t>(c)]);
  }
  batch_norm_backward_dx(s, int64_t{s.batch} * s.spatial, x, dy, gamma, saved_mean, saved_inv_std, sum_dy.data(),
                         sum_dy_xhat.data(), dx);
}

#define DTRAIN_INSTANTIATE(T)                                                                                         \
  template void batch_norm_forward_train<T>(const BatchNormShape&, const T*, const T*, const T*, T*, T*, T*, T*, T*); \
  template void batch_norm_moments<T>(const BatchNormShape&, const T*, double*, double*);                             \
  template void batch_norm_normalize<T>(const BatchNormShape&, int64_t, const double*, const double*, const T*,       \
                                        const T*, const T*, T*, T*, T*, T*, T*);                                      \
  template void batch_norm_forward_eval<T>(const BatchNormShape&, const T*, const T*, const T*, const T*, const T*,   \
                                           T*);                                                                       \
  template void batch_norm_backward<T>(const BatchNormShape&, const T*, const T*, const T*, const T*, const T*, T*,   \
                                       T*, T*);                                                                       \
  template void batch_norm_backward_sums<T>(const BatchNormShape&, const T*, const T*, const T*, const T*, double*,   \
                                            double*);                                                                 \
  template void batch_norm_backward_dx<T>(const BatchNormShape&, int64_t, const T*, const T*, const T*, const T*,     \
                                          const T*, const double*, const double*, T*);
DTRAIN_INSTANTIATE(float)
DTRAIN_INSTANTIATE(double)
#undef DTRAIN_INSTANTIATE

}  // namespace dtrain::models::cpu
