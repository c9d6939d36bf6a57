#pragma once
// Row-major GEMM on the CPU through OpenBLAS, for float (training) and double (gradient checks).
//   C[m x n] = alpha * op(A) * op(B) + beta * C,  op(X) = X or X^T.
// OpenBLAS runs single-threaded by default: one rank per core is the data-parallel layout, and
// BLAS threads on top would oversubscribe. DTRAIN_BLAS_THREADS=n overrides.
namespace dtrain::models::cpu {

template <typename T>
void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, T alpha, const T* a, const T* b, T beta, T* c);

}  // namespace dtrain::models::cpu
