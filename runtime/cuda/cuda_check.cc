#include "runtime/cuda/cuda_check.h"

namespace dtrain::runtime {

std::string cuda_error_text(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
}

std::string cudnn_error_text(cudnnStatus_t status) {
  std::string text = cudnnGetErrorString(status);
  // cuDNN 9 keeps a more specific message for the last failure on this thread.
  char last[512] = {};
  cudnnGetLastErrorString(last, sizeof(last));
  if (last[0] != '\0') text += std::string(" (") + last + ")";
  return text;
}

std::string cublas_error_text(cublasStatus_t status) {
  return std::string(cublasGetStatusName(status)) + ": " + cublasGetStatusString(status);
}

std::string nccl_error_text(ncclResult_t status) {
  std::string text = ncclGetErrorString(status);
  // The last NCCL message (e.g. which peer or transport failed) says more than the status.
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && last[0] != '\0')
    text += std::string(" (") + last + ")";
  return text;
}

}  // namespace dtrain::runtime
