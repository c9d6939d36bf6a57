#include "models/cpu/conv2d.h"

#include <algorithm>
#include <cstring>

#include "models/cpu/gemm.h"
#include "runtime/base/error.h"

namespace dtrain::models::cpu {
namespace {

// columns[(c, r, s), (oh, ow)] = x[c, oh*stride - pad + r, ow*stride - pad + s], 0 outside.
template <typename T>
void im2col(const Conv2dShape& p, const T* x, T* columns) {
  const int oh_n = p.out_h(), ow_n = p.out_w();
  for (int c = 0; c < p.in_channels; ++c) {
    for (int r = 0; r < p.kernel_h; ++r) {
      for (int s = 0; s < p.kernel_w; ++s) {
        T* row = columns + ((int64_t{c} * p.kernel_h + r) * p.kernel_w + s) * oh_n * ow_n;
        for (int oh = 0; oh < oh_n; ++oh) {
          const int ih = oh * p.stride_h - p.pad_h + r;
          T* out = row + int64_t{oh} * ow_n;
          if (ih < 0 || ih >= p.in_h) {
            std::fill(out, out + ow_n, T(0));
            continue;
          }
          const T* in = x + (int64_t{c} * p.in_h + ih) * p.in_w;
          for (int ow = 0; ow < ow_n; ++ow) {
            const int iw = ow * p.stride_w - p.pad_w + s;
            out[ow] = (iw >= 0 && iw < p.in_w) ? in[iw] : T(0);
          }
        }
      }
    }
  }
}

// The adjoint of im2col: accumulates columns back into dx (which the caller zeroed).
template <typename T>
void col2im(const Conv2dShape& p, const T* columns, T* dx) {
  const int oh_n = p.out_h(), ow_n = p.out_w();
  for (int c = 0; c < p.in_channels; ++c) {
    for (int r = 0; r < p.kernel_h; ++r) {
      for (int s = 0; s < p.kernel_w; ++s) {
        const T* row = columns + ((int64_t{c} * p.kernel_h + r) * p.kernel_w + s) * oh_n * ow_n;
        for (int oh = 0; oh < oh_n; ++oh) {
          const int ih = oh * p.stride_h - p.pad_h + r;
          if (ih < 0 || ih >= p.in_h) continue;
          T* out = dx + (int64_t{c} * p.in_h + ih) * p.in_w;
          const T* in = row + int64_t{oh} * ow_n;
          for (int ow = 0; ow < ow_n; ++ow) {
            const int iw = ow * p.stride_w - p.pad_w + s;
            if (iw >= 0 && iw < p.in_w) out[iw] += in[ow];
          }
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void conv2d_forward(const Conv2dShape& p, const T* x, const T* w, T* y, T* columns) {
  const int k = p.out_channels;
  const int crs = p.in_channels * p.kernel_h * p.kernel_w;
  const int ohw = p.out_h() * p.out_w();
  for (int n = 0; n < p.batch; ++n) {
    im2col(p, x + int64_t{n} * p.in_channels * p.in_h * p.in_w, columns);
    gemm<T>(false, false, k, ohw, crs, T(1), w, columns, T(0), y + int64_t{n} * k * ohw);
  }
}

template <typename T>
void conv2d_backward_data(const Conv2dShape& p, const T* dy, const T* w, T* dx, T* columns) {
  const int k = p.out_channels;
  const int crs = p.in_channels * p.kernel_h * p.kernel_w;
  const int ohw = p.out_h() * p.out_w();
  const int64_t image = int64_t{p.in_channels} * p.in_h * p.in_w;
  std::fill(dx, dx + p.input_size(), T(0));
  for (int n = 0; n < p.batch; ++n) {
    gemm<T>(true, false, crs, ohw, k, T(1), w, dy + int64_t{n} * k * ohw, T(0), columns);
    col2im(p, columns, dx + n * image);
  }
}

template <typename T>
void conv2d_backward_filter(const Conv2dShape& p, const T* x, const T* dy, T* dw, T* columns) {
  const int k = p.out_channels;
  const int crs = p.in_channels * p.kernel_h * p.kernel_w;
  const int ohw = p.out_h() * p.out_w();
  for (int n = 0; n < p.batch; ++n) {
    im2col(p, x + int64_t{n} * p.in_channels * p.in_h * p.in_w, columns);
    gemm<T>(false, true, k, crs, ohw, T(1), dy + int64_t{n} * k * ohw, columns, n == 0 ? T(0) : T(1), dw);
  }
}

template void conv2d_forward<float>(const Conv2dShape&, const float*, const float*, float*, float*);
template void conv2d_forward<double>(const Conv2dShape&, const double*, const double*, double*, double*);
template void conv2d_backward_data<float>(const Conv2dShape&, const float*, const float*, float*, float*);
template void conv2d_backward_data<double>(const Conv2dShape&, const double*, const double*, double*, double*);
template void conv2d_backward_filter<float>(const Conv2dShape&, const float*, const float*, float*, float*);
template void conv2d_backward_filter<double>(const Conv2dShape&, const double*, const double*, double*, double*);

}  // namespace dtrain::models::cpu
