#include "runtime/cuda/stream.h"

#include <utility>

#include "runtime/cuda/cuda_check.h"

namespace dtrain::runtime {

DeviceGuard::DeviceGuard(int device) {
  DTRAIN_CUDA_CHECK(cudaGetDevice(&previous_));
  if (device != previous_) DTRAIN_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  cudaSetDevice(previous_);
}

CudaStream::CudaStream(int device, int priority) : device_(device) {
  DeviceGuard guard(device);
  DTRAIN_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void CudaStream::synchronize() const {
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

CudaEvent::CudaEvent(bool timing) {
  DTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

CudaEvent::CudaEvent(int device, bool timing) {
  DeviceGuard guard(device);
  DTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void CudaEvent::record(cudaStream_t stream) {
  DTRAIN_CUDA_CHECK(cudaEventRecord(event_, stream));
}

void CudaEvent::make_stream_wait(cudaStream_t stream) const {
  DTRAIN_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

void CudaEvent::synchronize() const {
  DTRAIN_CUDA_CHECK(cudaEventSynchronize(event_));
}

bool CudaEvent::is_complete() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) return false;
  DTRAIN_CUDA_CHECK(status);
  return true;
}

float CudaEvent::elapsed_ms_since(const CudaEvent& start) const {
  float ms = 0;
  DTRAIN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

}  // namespace dtrain::runtime
