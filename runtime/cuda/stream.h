#pragma once
// RAII CUDA streams and events, and a guard that restores the current device.
#include <cuda_runtime_api.h>

namespace dtrain::runtime {

// Sets the current device for a scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// A non-blocking stream on `device` (it never synchronizes with the legacy default stream).
// priority: 0 is normal; lower numbers are higher priority (the comm stream uses the highest).
class CudaStream {
 public:
  explicit CudaStream(int device, int priority = 0);
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

// An event; `timing` enables elapsed_ms (and costs a little, so sync events leave it off). An event
// belongs to the device current when it is made, and recording it on another device's stream fails
// (cudaErrorInvalidResourceHandle): objects that hold events for a device other than the current
// one pass it, or make them under a DeviceGuard.
class CudaEvent {
 public:
  explicit CudaEvent(bool timing = false);
  // On `device`, whatever the current device.
  CudaEvent(int device, bool timing);
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  // Makes `stream` wait for this event without blocking the host.
  void make_stream_wait(cudaStream_t stream) const;
  void synchronize() const;
  bool is_complete() const;
  // Milliseconds from `start` to this event; both must be timing events that completed.
  float elapsed_ms_since(const CudaEvent& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace dtrain::runtime
