#pragma once
// What every GPU layer of one model replica shares: the device, the compute stream, the cuDNN and
// cuBLAS handles bound to that stream, the BN group of synchronized BN, and the numerics (fp32 NCHW, the reference,
// with TF32 allowed or not; or bf16 NHWC, the fast path). Activation tensors keep their logical NCHW shape in either
// layout; channels_last() says how they are stored.
#include <cublas_v2.h>
#include <cudnn.h>

#include "models/batch_stats_reducer.h"
#include "models/cuda/cudnn_conv2d.h"
#include "models/cuda/op_timer.h"
#include "runtime/cuda/stream.h"
#include "runtime/memory/dtype.h"

namespace dtrain::models::cuda {

class GpuContext {
 public:
  GpuContext(int device, ConvNumerics numerics, bool allow_tf32);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device() const { return stream_.device(); }
  cudaStream_t stream() const { return stream_.get(); }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  ConvNumerics numerics() const { return numerics_; }
  bool allow_tf32() const { return allow_tf32_; }
  bool bf16() const { return numerics_ == ConvNumerics::kBf16Nhwc; }
  bool channels_last() const { return bf16(); }
  runtime::DType activation_dtype() const { return bf16() ? runtime::DType::kBF16 : runtime::DType::kF32; }
  // Synchronized BN (models/batch_stats_reducer.h): the group every BN layer of this replica
  // exchanges its statistics over in training; null (the default): each uses its own batch.
  void set_batch_stats_reducer(BatchStatsReducer* group) { bn_group_ = group; }
  BatchStatsReducer* batch_stats_reducer() const { return bn_group_; }
  // The layers time their kernels into `timer` while it is set (op_timer.h); null: not timed.
  void set_op_timer(OpTimer* timer) { op_timer_ = timer; }
  OpTimer* op_timer() const { return op_timer_; }

 private:
  runtime::CudaStream stream_;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  ConvNumerics numerics_;
  bool allow_tf32_;
  BatchStatsReducer* bn_group_ = nullptr;
  OpTimer* op_timer_ = nullptr;
};

}  // namespace dtrain::models::cuda
