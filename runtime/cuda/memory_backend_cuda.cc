// Memory backend of CUDA builds: page-locked host memory and the device caching allocator.
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_allocator.h"
#include "runtime/memory/buffer.h"

namespace dtrain::runtime::detail {

void* allocate_page_locked(size_t bytes) {
  void* ptr = nullptr;
  if (cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();  // no driver or no GPU: the caller falls back to plain host memory
    return nullptr;
  }
  return ptr;
}

void free_page_locked(void* ptr) noexcept {
  cudaFreeHost(ptr);
}

void* allocate_device(size_t bytes, void* stream, int* device) {
  DTRAIN_CUDA_CHECK(cudaGetDevice(device)) << "device memory needs a usable GPU";
  return device_caching_allocator(*device).allocate(bytes, reinterpret_cast<CachingAllocator::StreamTag>(stream));
}

void free_device(void* ptr, int device) noexcept {
  try {
    device_caching_allocator(device).release(ptr);
  } catch (...) {
    // A destructor must not throw; a bad pointer here is a bug already reported elsewhere.
  }
}

}  // namespace dtrain::runtime::detail
