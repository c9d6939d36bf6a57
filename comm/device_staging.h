#pragma once
// Runs a host-side collective on device buffers: the device input is copied to pinned host memory,
// the host collective runs on the communicator's worker thread, and the result is copied back —
// all without blocking the calling thread. The caller's stream is held at the call's position
// (cuda/stream_gate.cuh), so work queued on that stream afterwards sees the result, as with NCCL.
// Builds without CUDA get an implementation that throws: there are no device buffers to stage.
#include <functional>
#include <memory>

#include "comm/collective.h"
#include "comm/comm_worker.h"

namespace dtrain::comm {

class DeviceStaging {
 public:
  DeviceStaging();
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // `run_host` receives the call rewritten onto pinned host buffers; it runs on `worker`'s thread.
  Work run(CommWorker& worker, const Collective& call, int world_size,
           std::function<void(const Collective&)> run_host);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dtrain::comm
