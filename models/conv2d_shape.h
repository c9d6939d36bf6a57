#pragma once
// The geometry of one 2-D convolution, one type for the CPU kernels (models/cpu/conv2d.h) and for
// cuDNN (models/cuda/cudnn_conv2d.h): batch and input planes, filters, kernel, stride and padding
// per axis. Filters are KCRS on the host; the GPU's bf16 path stores them KRSC.
#include <cstdint>
#include <string>

namespace dtrain::models {

// The positions a window of `window` taps at `stride` takes along an axis of `in` positions padded
// by `pad` on both sides: a convolution's or a pooling's output extent.
inline int window_positions(int in, int window, int stride, int pad) {
  return (in + 2 * pad - window) / stride + 1;
}

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

  int out_h() const { return window_positions(in_h, kernel_h, stride_h, pad_h); }
  int out_w() const { return window_positions(in_w, kernel_w, stride_w, pad_w); }
  int64_t input_size() const { return int64_t{batch} * in_channels * in_h * in_w; }
  int64_t output_size() const { return int64_t{batch} * out_channels * out_h() * out_w(); }
  int64_t filter_size() const { return int64_t{out_channels} * in_channels * kernel_h * kernel_w; }
  // Elements of the per-image im2col buffer the CPU kernels need as scratch.
  int64_t column_size() const { return int64_t{in_channels} * kernel_h * kernel_w * out_h() * out_w(); }
  // "N=2 C=3 HxW=17x19 -> K=8 RxS=7x7 stride 2x2 pad 3x3", for errors and logs.
  std::string describe() const;
};

// Throws UsageError naming the problem if the shape is empty or the kernel does not fit.
void validate(const Conv2dShape& shape);

}  // namespace dtrain::models
