#include "models/cpu/gemm.h"

#include <cblas.h>

#include <mutex>
#include <type_traits>

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

// cblas_sgemm or cblas_dgemm, by T.
template <typename T, typename... Args>
void cblas_gemm(Args... args) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(args...);
  } else {
    cblas_dgemm(args...);
  }
}

}  // namespace

template <typename T>
void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* a, const T* b, T beta, T* c) {
  configure_threads_once();
  cblas_gemm<T>(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
                ta ? m : k, b, tb ? k : n, beta, c, n);
}

template void gemm<float>(bool, bool, int, int, int, float, const float*, const float*, float, float*);
template void gemm<double>(bool, bool, int, int, int, double, const double*, const double*, double, double*);

}  // namespace dtrain::models::cpu
