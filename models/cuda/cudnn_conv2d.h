#pragma once
// 2-D convolution on the GPU through cuDNN: forward, backward data and backward filter, in the two
// numerics dtrain trains with: fp32 NCHW (the reference; TF32 tensor cores allowed or not) and
// bf16 NHWC (the fast path; fp32 accumulation).
//
// The algorithm of each pass is chosen once per shape by measurement (cudnnFind...Ex) and kept in
// a process-wide cache, so every layer of the same shape, and every later step, reuses it without
// measuring again. Workspaces are device Buffers (the caching allocator) on the handle's stream.
// The first call of a shape measures (and so synchronizes the stream); later calls only queue work.
#include <cudnn.h>

#include <cstddef>
#include <string>

#include "models/conv2d_shape.h"
#include "runtime/core/buffer.h"

namespace dtrain::models::cuda {

enum class ConvNumerics {
  kFp32Nchw,  // fp32 tensors, NCHW activations, KCRS filters
  kBf16Nhwc,  // bf16 tensors, NHWC activations, KRSC filters, fp32 accumulation
};

class CudnnConv2d {
 public:
  // allow_tf32 matters for kFp32Nchw only (off: exact fp32 FMA kernels).
  CudnnConv2d(cudnnHandle_t handle, const Conv2dShape& geometry, ConvNumerics numerics, bool allow_tf32);
  ~CudnnConv2d();
  CudnnConv2d(const CudnnConv2d&) = delete;
  CudnnConv2d& operator=(const CudnnConv2d&) = delete;

  // Device pointers in the layout and type of `numerics`; work is queued on the handle's stream.
  void forward(const void* x, const void* w, void* y);
  // Writes dx, or adds to it when accumulate (a residual block's two input gradients, without an
  // add kernel).
  void backward_data(const void* dy, const void* w, void* dx, bool accumulate = false);
  // Writes (does not add to) dw.
  void backward_filter(const void* x, const void* dy, void* dw);

  const Conv2dShape& geometry() const { return geometry_; }
  // How many passes this process has measured with cudnnFind (each shape and pass once).
  static size_t measurements_made();

 private:
  struct Pass {
    bool chosen = false;
    int algorithm = 0;
    size_t workspace_bytes = 0;
  };
  template <typename Perf, typename Find>
  void choose(Pass& pass, cudnnConvolutionDescriptor_t desc, int pass_index, const char* name, Find find);
  core::Buffer workspace(size_t bytes) const;

  cudnnHandle_t handle_;
  Conv2dShape geometry_;
  ConvNumerics numerics_;
  bool allow_tf32_;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  // One convolution descriptor per pass: each pass's algorithm runs with the math type it was
  // measured with, and the passes' choices differ.
  cudnnConvolutionDescriptor_t forward_desc_ = nullptr, backward_data_desc_ = nullptr, backward_filter_desc_ = nullptr;
  Pass forward_, backward_data_, backward_filter_;
};

}  // namespace dtrain::models::cuda
