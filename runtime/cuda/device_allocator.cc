#include "runtime/cuda/device_allocator.h"

#include <array>
#include <memory>
#include <mutex>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"

namespace dtrain::runtime {
namespace {

class CudaMallocAllocator final : public RawAllocator {
 public:
  explicit CudaMallocAllocator(int device) : device_(device) {}
  void* allocate(size_t bytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    // Under a thread-local capture (StepGraphs, the one place that captures, always inside the
    // caching allocator's graph pool) cudaMalloc is a "potentially unsafe" call and fails the
    // capture; this thread relaxes for the call alone. The memory is not part of the graph: the
    // graph pool keeps it for as long as the graph that was captured with it.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    DTRAIN_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    const cudaError_t restored = cudaThreadExchangeStreamCaptureMode(&mode);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error so the retry starts clean
      return nullptr;
    }
    DTRAIN_CUDA_CHECK(status) << "cudaMalloc of " << bytes << " bytes on device " << device_;
    DTRAIN_CUDA_CHECK(restored) << "restoring this thread's stream capture mode after cudaMalloc";
    return ptr;
  }
  void release(void* ptr) override {
    DeviceGuard guard(device_);
    cudaFree(ptr);
  }
  const char* name() const override { return "cudaMalloc"; }

 private:
  int device_;
};

constexpr int kMaxDevices = 64;

}  // namespace

CachingAllocator& device_caching_allocator(int device) {
  // Intentionally leaked: device memory must outlive every static that may still hold a Buffer,
  // and the driver reclaims it at exit anyway.
  static std::array<CachingAllocator*, kMaxDevices> allocators{};
  static std::mutex mutex;
  DTRAIN_CHECK(device >= 0 && device < kMaxDevices) << "device index " << device << " out of range";
  std::lock_guard lock(mutex);
  CachingAllocator*& slot = allocators[static_cast<size_t>(device)];
  if (slot == nullptr) slot = new CachingAllocator(std::make_unique<CudaMallocAllocator>(device));
  return *slot;
}

}  // namespace dtrain::runtime
