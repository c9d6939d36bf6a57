#pragma once
// Runs a host-side collective on device buffers: the device input is copied to pinned host memory,
// the host collective runs on the communicator's worker thread, and the result is copied back —
// all without blocking the calling thread. The caller's stream is held at the call's position
// (cuda/stream_gate.cuh), so work queued on that stream afterwards sees the result, as with NCCL.
// Builds without CUDA get an implementation that throws: there are no device buffers to stage.
#include <cstddef>
#include <functional>
#include <memory>

#include "comm/collective.h"
#include "comm/comm_worker.h"

namespace dtrain::comm {

class DeviceStaging {
 public:
  // All-reduces larger than piece_bytes are pipelined in pieces of that size: copies out, host
  // reduction and copies back overlap (DTRAIN_STAGING_PIECE_BYTES).
  explicit DeviceStaging(size_t piece_bytes);
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // On `worker`'s thread: `check` gets the original call once; `run_host` gets the call (or each
  // piece of it) rewritten onto pinned host buffers.
  Work run(CommWorker& worker, const Collective& call, int world_size, std::function<void(const Collective&)> check,
           std::function<void(const Collective&)> run_host);

  // For MPIs that take device pointers: no copies. On `worker`'s thread, once the caller's stream
  // has reached the call, `check` and then `run_device` get the call itself; the stream stays held
  // until run_device returns.
  Work run_direct(CommWorker& worker, const Collective& call, std::function<void(const Collective&)> check,
                  std::function<void(const Collective&)> run_device);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace dtrain::comm
