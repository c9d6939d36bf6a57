#include <atomic>
#include <chrono>
#include <thread>

#include "comm/cuda/stream_flag.cuh"
#include "runtime/core/cuda/cuda_check.h"

namespace dtrain::comm::cuda {
namespace {

__global__ void wait_for_value(const volatile uint64_t* counter, uint64_t at_least) {
  while (*counter < at_least) __nanosleep(1000);
}

__global__ void store_value(volatile uint64_t* counter, uint64_t value) {
  // Stream order has completed the earlier copies; the fence orders this thread's view as well.
  __threadfence_system();
  *counter = value;
  __threadfence_system();
}

}  // namespace

StreamFlag::StreamFlag() {
  void* host = nullptr;
  DTRAIN_CUDA_CHECK(cudaHostAlloc(&host, sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable));
  host_ = static_cast<volatile uint64_t*>(host);
  *host_ = 0;
  void* device = nullptr;
  DTRAIN_CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
  device_ = static_cast<uint64_t*>(device);
  // Load both kernels now (cudaFuncGetAttributes loads what lazy module loading has not).
  cudaFuncAttributes attributes;
  DTRAIN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, wait_for_value));
  DTRAIN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, store_value));
}

StreamFlag::~StreamFlag() {
  // Release any stream still waiting, so none is left held by a flag that no longer exists.
  *host_ = ~uint64_t{0};
  cudaFreeHost(const_cast<uint64_t*>(host_));
}

void StreamFlag::enqueue_wait(cudaStream_t stream, uint64_t at_least) {
  wait_for_value<<<1, 1, 0, stream>>>(device_, at_least);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "enqueuing a stream wait";
}

void StreamFlag::enqueue_set(cudaStream_t stream, uint64_t value) {
  store_value<<<1, 1, 0, stream>>>(device_, value);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "enqueuing a stream signal";
}

uint64_t StreamFlag::value() const {
  const uint64_t v = *host_;
  std::atomic_thread_fence(std::memory_order_acquire);  // data the GPU wrote before the value
  return v;
}

void StreamFlag::set(uint64_t value) {
  std::atomic_thread_fence(std::memory_order_release);  // our writes before the GPU sees the value
  *host_ = value;
}

void StreamFlag::wait_at_least(uint64_t at_least) const {
  for (int round = 0; value() < at_least; ++round) {
    if (round < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(round < 1024 ? 20 : 200));
    }
  }
}

}  // namespace dtrain::comm::cuda
