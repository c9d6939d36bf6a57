#include "models/cpu/pooling.h"

#include <algorithm>
#include <limits>

namespace dtrain::models::cpu {

template <typename T>
void max_pool_forward(const PoolShape& s, const T* x, T* y, int32_t* argmax) {
  const int oh_n = s.out_h(), ow_n = s.out_w();
  for (int64_t plane = 0; plane < int64_t{s.batch} * s.channels; ++plane) {
    const T* in = x + plane * s.in_h * s.in_w;
    T* out = y + plane * oh_n * ow_n;
    int32_t* arg = argmax + plane * oh_n * ow_n;
    for (int oh = 0; oh < oh_n; ++oh) {
      for (int ow = 0; ow < ow_n; ++ow) {
        T best = -std::numeric_limits<T>::infinity();
        int32_t best_at = -1;
        for (int r = 0; r < s.window; ++r) {
          const int ih = oh * s.stride - s.pad + r;
          if (ih < 0 || ih >= s.in_h) continue;
          for (int q = 0; q < s.window; ++q) {
            const int iw = ow * s.stride - s.pad + q;
            if (iw < 0 || iw >= s.in_w) continue;
            const T v = in[ih * s.in_w + iw];
            if (best_at < 0 || v > best) {
              best = v;
              best_at = ih * s.in_w + iw;
            }
          }
        }
        out[oh * ow_n + ow] = best;
        arg[oh * ow_n + ow] = best_at;
      }
    }
  }
}

template <typename T>
void max_pool_backward(const PoolShape& s, const T* dy, const int32_t* argmax, T* dx) {
  const int64_t in_plane = int64_t{s.in_h} * s.in_w;
  const int64_t out_plane = int64_t{s.out_h()} * s.out_w();
  std::fill(dx, dx + int64_t{s.batch} * s.channels * in_plane, T(0));
  for (int64_t plane = 0; plane < int64_t{s.batch} * s.channels; ++plane) {
    for (int64_t i = 0; i < out_plane; ++i)
      dx[plane * in_plane + argmax[plane * out_plane + i]] += dy[plane * out_plane + i];
  }
}

template <typename T>
void global_avg_pool_forward(int batch, int channels, int64_t spatial, const T* x, T* y) {
  for (int64_t plane = 0; plane < int64_t{batch} * channels; ++plane) {
    double sum = 0;
    for (int64_t i = 0; i < spatial; ++i) sum += x[plane * spatial + i];
    y[plane] = static_cast<T>(sum / static_cast<double>(spatial));
  }
}

template <typename T>
void global_avg_pool_backward(int batch, int channels, int64_t spatial, const T* dy, T* dx) {
  const T inv = static_cast<T>(1.0 / static_cast<double>(spatial));
  for (int64_t plane = 0; plane < int64_t{batch} * channels; ++plane) {
    std::fill(dx + plane * spatial, dx + (plane + 1) * spatial, dy[plane] * inv);
  }
}

template void max_pool_forward<float>(const PoolShape&, const float*, float*, int32_t*);
template void max_pool_forward<double>(const PoolShape&, const double*, double*, int32_t*);
template void max_pool_backward<float>(const PoolShape&, const float*, const int32_t*, float*);
template void max_pool_backward<double>(const PoolShape&, const double*, const int32_t*, double*);
template void global_avg_pool_forward<float>(int, int, int64_t, const float*, float*);
template void global_avg_pool_forward<double>(int, int, int64_t, const double*, double*);
template void global_avg_pool_backward<float>(int, int, int64_t, const float*, float*);
template void global_avg_pool_backward<double>(int, int, int64_t, const double*, double*);

}  // namespace dtrain::models::cpu
