#include <atomic>

#include "comm/cuda/stream_gate.cuh"
#include "runtime/core/cuda/cuda_check.h"

namespace dtrain::comm::cuda {
namespace {

__global__ void wait_for_ticket(const volatile uint64_t* counter, uint64_t ticket) {
  while (*counter < ticket) __nanosleep(1000);
}

}  // namespace

StreamGate::StreamGate() {
  void* host = nullptr;
  DTRAIN_CUDA_CHECK(cudaHostAlloc(&host, sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable));
  host_counter_ = static_cast<volatile uint64_t*>(host);
  *host_counter_ = 0;
  void* device = nullptr;
  DTRAIN_CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
  device_view_ = static_cast<uint64_t*>(device);
}

StreamGate::~StreamGate() {
  // Open everything, so no stream stays held by a gate that no longer exists.
  *host_counter_ = ~uint64_t{0};
  cudaFreeHost(const_cast<uint64_t*>(host_counter_));
}

uint64_t StreamGate::hold(cudaStream_t stream) {
  const uint64_t ticket = ++next_ticket_;
  wait_for_ticket<<<1, 1, 0, stream>>>(device_view_, ticket);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "enqueuing the stream gate";
  return ticket;
}

void StreamGate::open(uint64_t ticket) {
  std::atomic_thread_fence(std::memory_order_release);  // results copied back before the gate opens
  *host_counter_ = ticket;
}

}  // namespace dtrain::comm::cuda
