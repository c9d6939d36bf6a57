#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_elements.cuh"
#include "train/engine/cuda/accumulate_gradients.h"

namespace dtrain::train::cuda {
namespace {

enum class Fold { kStart, kAdd, kFinish };

template <Fold kFold>
__global__ void fold_kernel(float* __restrict__ grads, float* __restrict__ sum, size_t n, float count) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    if constexpr (kFold == Fold::kStart) {
      sum[i] = grads[i];
    } else if constexpr (kFold == Fold::kAdd) {
      sum[i] = __fadd_rn(sum[i], grads[i]);
    } else {
      grads[i] = __fdiv_rn(__fadd_rn(grads[i], sum[i]), count);
    }
  }
}

}  // namespace

void accumulate_gradients(cudaStream_t stream, const MicroBatch& m, float* grads, float* sum, size_t n) {
  check_micro_batch(m);
  if (m.count == 1 || n == 0) return;
  const unsigned blocks = runtime::cuda::elementwise_grid(static_cast<int64_t>(n));
  constexpr int kThreads = runtime::cuda::kElementwiseThreads;
  const float count = static_cast<float>(m.count);
  if (m.index == 0) {
    fold_kernel<Fold::kStart><<<blocks, kThreads, 0, stream>>>(grads, sum, n, count);
  } else if (!m.last()) {
    fold_kernel<Fold::kAdd><<<blocks, kThreads, 0, stream>>>(grads, sum, n, count);
  } else {
    fold_kernel<Fold::kFinish><<<blocks, kThreads, 0, stream>>>(grads, sum, n, count);
  }
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "gradient accumulation kernel";
}

}  // namespace dtrain::train::cuda
