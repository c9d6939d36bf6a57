#pragma once
// Device buffers (DTRAIN_CUDA) behind an interface that names no CUDA type, so the C entry points,
// the engine and the host executor compile the same with and without CUDA: cuda/device_cuda.cc and
// cuda/device_executor_cuda.cc implement it with the CUDA runtime, device_cpu.cc without (there
// every device buffer is DTRAIN_ERR_UNSUPPORTED before anything below is reached).
//
// Stream order, as Horovod's GPU operations: on submission (the caller's thread) an event is
// recorded on the caller's stream; the background thread makes the library's own stream wait on
// it (no host wait), runs the collective there and records a completion event, which
// dtrain_wait / dtrain_poll wait for on the host and dtrain_wait_stream makes the caller's stream
// wait for.
#include <memory>
#include <vector>

#include "comm/backend_kind.h"
#include "library/executor.h"
#include "library/operation.h"
#include "library/request.h"
#include "runtime/rank/rank_context.h"

namespace dtrain::library {

// Whether this libdtrain was built with CUDA.
bool built_with_cuda();

// On the caller's thread: AbiError(DTRAIN_ERR_INVALID_ARGUMENT) naming `argument` when `p` is not
// device memory of GPU `gpu` (device) or is device memory (!device). Without CUDA: no check.
void check_buffer_location(const char* argument, const void* p, bool device, int gpu);

// A CUDA event shared between the caller's threads and the background thread. Thread-safe.
class StreamEvent {
 public:
  virtual ~StreamEvent() = default;
  // Records a fresh event on `stream` (a cudaStream_t; NULL: the legacy default stream) of GPU
  // `gpu`, on the caller's thread; AbiError(DTRAIN_ERR_INVALID_ARGUMENT) naming "stream" when that
  // fails.
  static std::shared_ptr<StreamEvent> record_on(void* stream, int gpu);

  // Makes `stream` wait for the event without blocking the host.
  virtual void make_stream_wait(void* stream) = 0;
  virtual void synchronize() = 0;
  virtual bool complete() = 0;
  // Blocks until the operation's part on the host (a cross-node step staged through host memory)
  // has finished, and rethrows its failure: before a stream is made to wait, so that a failed
  // step fails the operation it belongs to. Nothing to wait for by default.
  virtual void finish_host_part() {}
};

// The background thread's executor of agreed device operations. Not thread-safe: only the
// background thread calls it, and from its creation on that thread's current device is `gpu`.
class DeviceExecutor {
 public:
  virtual ~DeviceExecutor() = default;
  // Collective over ctx (created by every rank at the same point of the agreed order): binds `gpu`
  // to the calling thread and makes the library's stream and the job's device communicator on
  // `backend` (DTRAIN_GPU_BACKEND; auto: comm::make_communicator's choice for GPUs). A UsageError
  // on every rank when the ranks asked for different backends. `host` runs what the device
  // communicator cannot do, on pinned host copies.
  static std::unique_ptr<DeviceExecutor> create(const runtime::RankContext& ctx, int gpu, comm::Backend backend,
                                                Executor& host);

  // `ops`: this rank's operations of `response` (device ones), in the response's order. Orders the
  // work after each op's `ready` event and sets each op's `done` event. Throws on failure.
  virtual void run(const Response& response, const std::vector<Operation*>& ops) = 0;
};

}  // namespace dtrain::library
