#pragma once
// Max pooling (any window, stride, padding; padding never wins the max) and global average
// pooling, NCHW.
#include <cstdint>

#include "models/conv2d_shape.h"

namespace dtrain::models::cpu {

struct PoolShape {
  int batch = 1;
  int channels = 1;
  int in_h = 1;
  int in_w = 1;
  int window = 3;
  int stride = 2;
  int pad = 1;
  int out_h() const { return window_positions(in_h, window, stride, pad); }
  int out_w() const { return window_positions(in_w, window, stride, pad); }
};

// argmax[i] is the input index (within its image-channel plane) that output i came from.
template <typename T>
void max_pool_forward(const PoolShape& s, const T* x, T* y, int32_t* argmax);
// dx = 0, then each dy goes to its argmax (overlapping windows accumulate).
template <typename T>
void max_pool_backward(const PoolShape& s, const T* dy, const int32_t* argmax, T* dx);

// y[n, c] = mean over the plane.
template <typename T>
void global_avg_pool_forward(int batch, int channels, int64_t spatial, const T* x, T* y);
template <typename T>
void global_avg_pool_backward(int batch, int channels, int64_t spatial, const T* dy, T* dx);

}  // namespace dtrain::models::cpu
