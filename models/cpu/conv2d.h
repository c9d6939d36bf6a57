#pragma once
// 2-D convolution without bias, NCHW activations and KCRS filters, any kernel, stride and padding
// (models/conv2d_shape.h): im2col then one GEMM per image (OpenBLAS). The CPU reference path; templated on the scalar
// so the gradient checks run the same code in float64.
#include <cstdint>

#include "models/conv2d_shape.h"

namespace dtrain::models::cpu {

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
