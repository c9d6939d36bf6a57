#pragma once
// 2-D convolution without bias, NCHW activations and KCRS filters, any kernel, stride and padding:
// im2col then one GEMM per image (OpenBLAS). The CPU reference path; templated on the scalar so
// the gradient checks run the same code in float64.
#include <cstdint>

namespace dtrain::models::cpu {

struct Conv2dShape {
  int batch = 1;
  int in_channels = 1;
  int in_h = 1;
  int in_w = 1;
  int out_channels = 1;
  int kernel_h = 1;
  int kernel_w = 1;
  int stride_h = 1;
  int stride_w = 1;
  int pad_h = 0;
  int pad_w = 0;

  int out_h() const { return (in_h + 2 * pad_h - kernel_h) / stride_h + 1; }
  int out_w() const { return (in_w + 2 * pad_w - kernel_w) / stride_w + 1; }
  int64_t input_size() const { return int64_t{batch} * in_channels * in_h * in_w; }
  int64_t output_size() const { return int64_t{batch} * out_channels * out_h() * out_w(); }
  int64_t filter_size() const { return int64_t{out_channels} * in_channels * kernel_h * kernel_w; }
  // Elements of the per-image im2col buffer the calls below need as scratch.
  int64_t column_size() const { return int64_t{in_channels} * kernel_h * kernel_w * out_h() * out_w(); }
};

// Throws UsageError naming the problem if the shape is empty or the kernel does not fit.
void validate(const Conv2dShape& shape);

// y = conv(x, w).
template <typename T>
void conv2d_forward(const Conv2dShape& shape, const T* x, const T* w, T* y, T* columns);
// dx = conv^T(dy, w) (overwrites dx).
template <typename T>
void conv2d_backward_data(const Conv2dShape& shape, const T* dy, const T* w, T* dx, T* columns);
// dw = sum over images of dy x im2col(x)^T (overwrites dw).
template <typename T>
void conv2d_backward_filter(const Conv2dShape& shape, const T* x, const T* dy, T* dw, T* columns);

}  // namespace dtrain::models::cpu
