#pragma once
// The fully connected layer on the GPU through cuBLAS (cublasGemmEx), with the CPU reference's
// semantics (models/cpu/linear.h): y = x w^T + bias, w is [out, in] row-major as in PyTorch.
// fp32 (TF32 allowed or not) or bf16 activations and weights with fp32 accumulation; the bias and
// the parameter gradients are fp32 in both, so dw lands straight in the fp32 flat gradient buffer.
// Work is queued on the handle's stream. allow_tf32 matters for fp32 only.
#include <cublas_v2.h>

namespace dtrain::models::cuda {

struct LinearDims {
  int batch = 0, in_features = 0, out_features = 0;
};

template <typename T>
void linear_forward(cublasHandle_t handle, const LinearDims& dims, bool allow_tf32, const T* x, const T* w,
                    const float* bias, T* y);
// Writes dw and dbias, and dx when it is not null.
template <typename T>
void linear_backward(cublasHandle_t handle, const LinearDims& dims, bool allow_tf32, const T* x, const T* w,
                     const T* dy, T* dx, float* dw, float* dbias);

}  // namespace dtrain::models::cuda
