// device.h's events and pointer checks with the CUDA runtime (the executor is in
// device_executor_cuda.cc).
#include <cuda_runtime_api.h>

#include <sstream>
#include <string>

#include "include/dtrain/dtrain.h"
#include "library/cuda/stream_event_cuda.h"
#include "library/device.h"
#include "library/engine.h"
#include "runtime/cuda/cuda_check.h"

namespace dtrain::library {
namespace {

std::string address(const void* p) {
  std::ostringstream text;
  text << p;
  return text.str();
}

}  // namespace

bool built_with_cuda() {
  return true;
}

void check_buffer_location(const char* argument, const void* p, bool device, int gpu) {
  // On the rank's GPU, so the first CUDA call of a caller's thread makes no context on GPU 0.
  runtime::DeviceGuard guard(gpu);
  cudaPointerAttributes attributes{};
  const cudaError_t rc = cudaPointerGetAttributes(&attributes, p);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();  // an address CUDA does not know is host memory; clear the sticky text
    attributes.type = cudaMemoryTypeUnregistered;
  }
  const bool on_device = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  const std::string what = std::string(argument) + ": " + address(p);
  if (device && !on_device)
    throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT,
                   what + " is host memory, but device is DTRAIN_CUDA (device memory of GPU " + std::to_string(gpu) +
                       "); pass DTRAIN_HOST for host buffers");
  if (device && attributes.type == cudaMemoryTypeDevice && attributes.device != gpu)
    throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, what + " is memory of GPU " + std::to_string(attributes.device) +
                                                    ", but this rank's GPU is " + std::to_string(gpu) +
                                                    " (dtrain_gpu())");
  if (!device && attributes.type == cudaMemoryTypeDevice)
    throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, what + " is device memory of GPU " + std::to_string(attributes.device) +
                                                    ", but device is DTRAIN_HOST; pass DTRAIN_CUDA and its stream");
}

std::shared_ptr<StreamEvent> StreamEvent::record_on(void* stream, int gpu) {
  try {
    runtime::DeviceGuard guard(gpu);
    auto event = std::make_shared<CudaStreamEvent>();
    event->record(static_cast<cudaStream_t>(stream));
    return event;
  } catch (const runtime::Error& e) {
    throw AbiError(DTRAIN_ERR_INVALID_ARGUMENT, "stream: could not record an event on " + address(stream) +
                                                    " (a cudaStream_t of GPU " + std::to_string(gpu) +
                                                    ", or NULL for the default stream?): " + e.what());
  }
}

void CudaStreamEvent::record(cudaStream_t stream) {
  event_.record(stream);
}
void CudaStreamEvent::make_stream_wait(void* stream) {
  event_.make_stream_wait(static_cast<cudaStream_t>(stream));
}
void CudaStreamEvent::synchronize() {
  event_.synchronize();
}
bool CudaStreamEvent::complete() {
  return event_.is_complete();
}

}  // namespace dtrain::library
