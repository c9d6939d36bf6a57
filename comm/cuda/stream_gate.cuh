#pragma once
// A gate that holds a CUDA stream at a point until the host opens it, without blocking any host
// thread: a one-thread kernel polls a counter in mapped pinned memory. Used by DeviceStaging, whose
// worker thread opens ticket t once the staged collective t has finished. (A blocking host function,
// cudaLaunchHostFunc, would be simpler, but CUDA forbids host functions that wait on other CUDA work,
// and the staged copies are exactly that.)
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dtrain::comm::cuda {

class StreamGate {
 public:
  StreamGate();
  ~StreamGate();
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  // Enqueues a wait on `stream` and returns its ticket; tickets are handed out in order.
  uint64_t hold(cudaStream_t stream);
  // Opens every ticket up to and including `ticket` (tickets must be opened in order).
  void open(uint64_t ticket);

 private:
  volatile uint64_t* host_counter_ = nullptr;  // pinned, mapped: the kernel reads it over the bus
  uint64_t* device_view_ = nullptr;
  uint64_t next_ticket_ = 0;
};

}  // namespace dtrain::comm::cuda
