// The device RingMemory: scratch in device (or managed) memory, kernels on a private stream that is
// synchronized after each operation, because MPI reads the result next.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "comm/cuda/convert_kernels.cuh"
#include "comm/host/ring_memory.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"

namespace dtrain::comm {
namespace {

class DeviceRingMemory final : public RingMemory {
 public:
  explicit DeviceRingMemory(bool managed) : managed_(managed) {
    int device = 0;
    DTRAIN_CUDA_CHECK(cudaGetDevice(&device));
    stream_ = std::make_unique<runtime::CudaStream>(device);
  }
  ~DeviceRingMemory() override {
    for (void* p : allocations_) cudaFree(p);
  }

  // Outgrown buffers are not freed until the end: cudaFree synchronizes the whole device, and the
  // caller's stream is held (DeviceStaging::run_direct) while this runs, so it would never return.
  Block allocate(size_t count) override {
    void* p = nullptr;
    const size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
    if (managed_) {
      DTRAIN_CUDA_CHECK(cudaMallocManaged(&p, bytes));
    } else {
      DTRAIN_CUDA_CHECK(cudaMalloc(&p, bytes));
    }
    allocations_.push_back(p);
    return Block(static_cast<float*>(p), [](float*) {});
  }
  void add_scaled(float* out, const float* a, const float* b, size_t n, float scale) override {
    cuda::launch_add_scaled(out, a, b, n, scale, stream_->get());
    stream_->synchronize();
  }
  void scale_copy(float* out, const float* in, size_t n, float scale) override {
    cuda::launch_scale(in, scale, out, n, stream_->get());
    stream_->synchronize();
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (dst == src || bytes == 0) return;
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_->get()));
    stream_->synchronize();
  }
  Location where() const override { return Location::gpu(stream_->get()); }
  void wait() override { stream_->synchronize(); }

 private:
  bool managed_;
  std::unique_ptr<runtime::CudaStream> stream_;
  std::vector<void*> allocations_;
};

}  // namespace

std::unique_ptr<RingMemory> make_device_ring_memory(bool managed) {
  return std::make_unique<DeviceRingMemory>(managed);
}

}  // namespace dtrain::comm
