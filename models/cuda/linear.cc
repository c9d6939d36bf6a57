#include "models/cuda/linear.h"

#include <type_traits>

#include "models/cuda/elementwise.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/memory/dtype.h"

namespace dtrain::models::cuda {
namespace {

template <typename T>
constexpr cudaDataType_t data_type() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
}

cublasComputeType_t compute_type(bool fp32, bool allow_tf32) {
  return fp32 && allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

cudaStream_t stream_of(cublasHandle_t handle) {
  cudaStream_t stream = nullptr;
  DTRAIN_CUBLAS_CHECK(cublasGetStream(handle, &stream));
  return stream;
}

}  // namespace

// cuBLAS is column-major: a row-major [r, c] matrix is its column-major [c, r] transpose, so
//   y[N, out] = x[N, in] w[out, in]^T   is   Y^T = W^T' X^T'  with W' = w as [in, out] col-major.
template <typename T>
void linear_forward(cublasHandle_t handle, const LinearDims& d, bool allow_tf32, const T* x, const T* w,
                    const float* bias, T* y) {
  const float one = 1.0f, zero = 0.0f;
  constexpr cudaDataType_t type = data_type<T>();
  DTRAIN_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, d.out_features, d.batch, d.in_features, &one, w,
                                   type, d.in_features, x, type, d.in_features, &zero, y, type, d.out_features,
                                   compute_type(std::is_same_v<T, float>, allow_tf32), CUBLAS_GEMM_DEFAULT))
      << "linear forward " << d.batch << "x" << d.in_features << " -> " << d.out_features;
  add_bias_rows(stream_of(handle), d.batch, d.out_features, bias, y);
}

template <typename T>
void linear_backward(cublasHandle_t handle, const LinearDims& d, bool allow_tf32, const T* x, const T* w, const T* dy,
                     T* dx, float* dw, float* dbias) {
  const float one = 1.0f, zero = 0.0f;
  constexpr cudaDataType_t type = data_type<T>();
  const cublasComputeType_t compute = compute_type(std::is_same_v<T, float>, allow_tf32);
  // dw[out, in] = dy^T x: as [in, out] col-major, X^T' (in x N) times dY^T'^T (N x out); fp32 out.
  DTRAIN_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, d.in_features, d.out_features, d.batch, &one, x,
                                   type, d.in_features, dy, type, d.out_features, &zero, dw, CUDA_R_32F, d.in_features,
                                   compute, CUBLAS_GEMM_DEFAULT))
      << "linear weight gradient " << d.batch << "x" << d.in_features << " -> " << d.out_features;
  bias_gradient(stream_of(handle), d.batch, d.out_features, dy, dbias);
  if (dx == nullptr) return;
  // dx[N, in] = dy[N, out] w[out, in]: as [in, N] col-major, W' (in x out) times dY^T' (out x N).
  DTRAIN_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d.in_features, d.batch, d.out_features, &one, w,
                                   type, d.in_features, dy, type, d.out_features, &zero, dx, type, d.in_features,
                                   compute, CUBLAS_GEMM_DEFAULT))
      << "linear input gradient " << d.batch << "x" << d.in_features << " -> " << d.out_features;
}

template void linear_forward<float>(cublasHandle_t, const LinearDims&, bool, const float*, const float*, const float*,
                                    float*);
template void linear_forward<runtime::bfloat16>(cublasHandle_t, const LinearDims&, bool, const runtime::bfloat16*,
                                                const runtime::bfloat16*, const float*, runtime::bfloat16*);
template void linear_backward<float>(cublasHandle_t, const LinearDims&, bool, const float*, const float*, const float*,
                                     float*, float*, float*);
template void linear_backward<runtime::bfloat16>(cublasHandle_t, const LinearDims&, bool, const runtime::bfloat16*,
                                                 const runtime::bfloat16*, const runtime::bfloat16*, runtime::bfloat16*,
                                                 float*, float*);

}  // namespace dtrain::models::cuda
