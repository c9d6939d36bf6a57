#include "models/cpu/gemm.h"

#include <cblas.h>

#include <mutex>

#include "runtime/base/env.h"

namespace dtrain::models::cpu {
namespace {

void configure_threads_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const auto threads = runtime::env_int("DTRAIN_BLAS_THREADS", 1, 1024);
    openblas_set_num_threads(static_cast<int>(threads.value_or(1)));
  });
}

}  // namespace

template <>
void gemm<float>(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
                 float* c) {
  configure_threads_once();
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              ta ? m : k, b, tb ? k : n, beta, c, n);
}

template <>
void gemm<double>(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, const double* b, double beta,
                  double* c) {
  configure_threads_once();
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              ta ? m : k, b, tb ? k : n, beta, c, n);
}

}  // namespace dtrain::models::cpu
