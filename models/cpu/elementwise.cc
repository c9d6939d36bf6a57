#include "models/cpu/elementwise.h"

namespace dtrain::models::cpu {

template <typename T>
void relu_forward(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
}

template <typename T>
void relu_backward(const T* y, const T* dy, T* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

template <typename T>
void residual_add_forward(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

template void relu_forward<float>(const float*, float*, int64_t);
template void relu_forward<double>(const double*, double*, int64_t);
template void relu_backward<float>(const float*, const float*, float*, int64_t);
template void relu_backward<double>(const double*, const double*, double*, int64_t);
template void residual_add_forward<float>(const float*, const float*, float*, int64_t);
template void residual_add_forward<double>(const double*, const double*, double*, int64_t);

}  // namespace dtrain::models::cpu
