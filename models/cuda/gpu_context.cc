#include "models/cuda/gpu_context.h"

#include "runtime/cuda/cuda_check.h"

namespace dtrain::models::cuda {

GpuContext::GpuContext(int device, ConvNumerics numerics, bool allow_tf32)
    : stream_(device), numerics_(numerics), allow_tf32_(allow_tf32) {
  runtime::DeviceGuard on(device);
  DTRAIN_CUDNN_CHECK(cudnnCreate(&cudnn_)) << "creating a cuDNN handle on GPU " << device;
  DTRAIN_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_.get()));
  DTRAIN_CUBLAS_CHECK(cublasCreate(&cublas_)) << "creating a cuBLAS handle on GPU " << device;
  DTRAIN_CUBLAS_CHECK(cublasSetStream(cublas_, stream_.get()));
  // TF32 for the fp32 path is chosen per call (compute type), so the handle's math mode stays default.
}

GpuContext::~GpuContext() {
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
}

}  // namespace dtrain::models::cuda
