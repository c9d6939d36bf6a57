#pragma once
// Check macros for the CUDA runtime, cuDNN, cuBLAS and NCCL. Each turns a failing status into the
// matching typed Error (error.h) carrying the library's own error name and text.
//   DTRAIN_CUDA_CHECK(cudaMalloc(&p, n)) << "activations of layer " << name;
// After a kernel launch, DTRAIN_CUDA_CHECK(cudaGetLastError()).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "runtime/base/error.h"

namespace dtrain::runtime {

std::string cuda_error_text(cudaError_t status);
std::string cudnn_error_text(cudnnStatus_t status);
std::string cublas_error_text(cublasStatus_t status);
std::string nccl_error_text(ncclResult_t status);

}  // namespace dtrain::runtime

#define DTRAIN_CUDA_CHECK(call)                                               \
  for (cudaError_t dtrain_cuda_rc_ = (call); dtrain_cuda_rc_ != cudaSuccess;) \
  DTRAIN_ERROR_STREAM_(::dtrain::runtime::ErrorKind::kCuda, #call, ::dtrain::runtime::cuda_error_text(dtrain_cuda_rc_))

#define DTRAIN_CUDNN_CHECK(call)                                                           \
  for (cudnnStatus_t dtrain_cudnn_rc_ = (call); dtrain_cudnn_rc_ != CUDNN_STATUS_SUCCESS;) \
  DTRAIN_ERROR_STREAM_(::dtrain::runtime::ErrorKind::kCudnn, #call,                        \
                       ::dtrain::runtime::cudnn_error_text(dtrain_cudnn_rc_))

#define DTRAIN_CUBLAS_CHECK(call)                                                              \
  for (cublasStatus_t dtrain_cublas_rc_ = (call); dtrain_cublas_rc_ != CUBLAS_STATUS_SUCCESS;) \
  DTRAIN_ERROR_STREAM_(::dtrain::runtime::ErrorKind::kCublas, #call,                           \
                       ::dtrain::runtime::cublas_error_text(dtrain_cublas_rc_))

#define DTRAIN_NCCL_CHECK(call)                                                \
  for (ncclResult_t dtrain_nccl_rc_ = (call); dtrain_nccl_rc_ != ncclSuccess;) \
  DTRAIN_ERROR_STREAM_(::dtrain::runtime::ErrorKind::kNccl, #call, ::dtrain::runtime::nccl_error_text(dtrain_nccl_rc_))
