#pragma once
// The launch of models/cuda's grid-stride kernels: `work_items` items on `stream`,
// kElementwiseThreads threads a block and elementwise_grid's blocks (runtime/cuda/device_elements.cuh),
// then the launch's check, whose error names `what`.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_elements.cuh"

namespace dtrain::models::cuda {

template <typename... Params, typename... Args>
void launch_elementwise(void (*kernel)(Params...), int64_t work_items, cudaStream_t stream, const char* what,
                        Args&&... args) {
  kernel<<<runtime::cuda::elementwise_grid(work_items), runtime::cuda::kElementwiseThreads, 0, stream>>>(
      std::forward<Args>(args)...);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << what;
}

}  // namespace dtrain::models::cuda
