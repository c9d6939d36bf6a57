#include "models/cpu/linear.h"

#include <algorithm>

#include "models/cpu/gemm.h"

namespace dtrain::models::cpu {

template <typename T>
void linear_forward(int batch, int in_features, int out_features, const T* x, const T* w, const T* bias, T* y) {
  for (int b = 0; b < batch; ++b) std::copy(bias, bias + out_features, y + static_cast<long>(b) * out_features);
  gemm<T>(false, true, batch, out_features, in_features, T(1), x, w, T(1), y);
}

template <typename T>
void linear_backward(int batch, int in_features, int out_features, const T* x, const T* w, const T* dy, T* dx, T* dw,
                     T* dbias) {
  gemm<T>(false, false, batch, in_features, out_features, T(1), dy, w, T(0), dx);
  gemm<T>(true, false, out_features, in_features, batch, T(1), dy, x, T(0), dw);
  std::fill(dbias, dbias + out_features, T(0));
  for (int b = 0; b < batch; ++b) {
    for (int o = 0; o < out_features; ++o) dbias[o] += dy[static_cast<long>(b) * out_features + o];
  }
}

template void linear_forward<float>(int, int, int, const float*, const float*, const float*, float*);
template void linear_forward<double>(int, int, int, const double*, const double*, const double*, double*);
template void linear_backward<float>(int, int, int, const float*, const float*, const float*, float*, float*, float*);
template void linear_backward<double>(int, int, int, const double*, const double*, const double*, double*, double*,
                                      double*);

}  // namespace dtrain::models::cpu
