#pragma once
// 2-D convolution on the GPU through cuDNN: forward, backward data and backward filter, in the two
// numerics dtrain trains with: fp32 NCHW (the reference; TF32 tensor cores allowed or not) and
// bf16 NHWC (the fast path; fp32 accumulation).
//
// Each pass runs a cuDNN graph-API execution plan chosen once per shape by measurement, from a
// process-wide cache (conv_plan_cache.h), so every layer of the same shape, and every later step,
// reuses it without measuring again. Workspaces are device Buffers (the caching allocator) on the
// handle's stream. The first call of a shape measures (and so synchronizes the stream); later
// calls only queue work.
#include <cudnn.h>

#include <cstddef>
#include <memory>

#include "models/conv2d_shape.h"
#include "models/cuda/conv_numerics.h"
#include "models/cuda/conv_plan_cache.h"
#include "runtime/memory/buffer.h"

namespace dtrain::models::cuda {

class CudnnConv2d {
 public:
  // allow_tf32 matters for kFp32Nchw only (off: exact fp32 FMA kernels).
  CudnnConv2d(cudnnHandle_t handle, const Conv2dShape& geometry, ConvNumerics numerics, bool allow_tf32);

  // Device pointers in the layout and type of `numerics`; work is queued on the handle's stream.
  void forward(const void* x, const void* w, void* y);
  // Writes dx, or adds to it when accumulate (a residual block's two input gradients, without an
  // add kernel).
  void backward_data(const void* dy, const void* w, void* dx, bool accumulate = false);
  // Writes (does not add to) dw.
  void backward_filter(const void* x, const void* dy, void* dw);

  const Conv2dShape& geometry() const { return geometry_; }
  // How many passes this process has measured (each shape, pass and beta once).
  static size_t measurements_made();
  // The largest workspace a pass of this process has run with (the part of the device memory
  // peak that device_memory_plan.h cannot predict).
  static size_t largest_workspace_bytes();

 private:
  const ConvPlan& plan(ConvPass pass, bool accumulate, const ConvOperands& measure_on);
  void run(const ConvPlan& plan, const ConvOperands& operands);

  cudnnHandle_t handle_;
  Conv2dShape geometry_;
  ConvNumerics numerics_;
  bool allow_tf32_;
  // This layer's plans, from the process-wide cache: forward, backward data (beta 0 and 1),
  // backward filter.
  std::shared_ptr<const ConvPlan> forward_, backward_data_[2], backward_filter_;
};

}  // namespace dtrain::models::cuda
