// DeviceStaging for CUDA builds. The caller's stream is held by a StreamGate; the worker copies the
// input out once the stream reaches the call (an event), runs the host collective on pinned
// buffers, copies the result back, and opens the gate.
#include <cuda_runtime_api.h>

#include "comm/communicator.h"
#include <algorithm>
#include <vector>

#include "comm/cuda/stream_gate.cuh"
#include "comm/device_staging.h"
#include "runtime/core/buffer.h"
#include "runtime/core/cuda/cuda_check.h"
#include "runtime/core/cuda/stream.h"
#include "runtime/core/log.h"

namespace dtrain::comm {
namespace {

// Grows a pinned staging buffer without freeing the old one: cudaFreeHost synchronizes the whole
// device, and the worker calling it while a StreamGate holds a stream for this very worker would
// deadlock. Outgrown buffers are kept until the DeviceStaging is destroyed; doubling bounds them.
void grow(core::Buffer& buffer, size_t bytes, std::vector<core::Buffer>& retired) {
  if (buffer.bytes() >= bytes) return;
  const size_t size = std::max(bytes, 2 * buffer.bytes());
  if (buffer.data() != nullptr) retired.push_back(std::move(buffer));
  buffer = core::Buffer(core::MemoryKind::kPinnedHost, size);
}

}  // namespace

struct DeviceStaging::State {
  int device = 0;
  cuda::StreamGate gate;
  std::unique_ptr<core::CudaStream> copy_stream;  // created on the worker's first use
  core::Buffer host_send;
  core::Buffer host_recv;
  std::vector<core::Buffer> retired;
};

DeviceStaging::DeviceStaging() : state_(std::make_unique<State>()) {
  DTRAIN_CUDA_CHECK(cudaGetDevice(&state_->device));
}

DeviceStaging::~DeviceStaging() = default;

Work DeviceStaging::run(CommWorker& worker, const Collective& call, int world_size,
                        std::function<void(const Collective&)> run_host) {
  const auto user_stream = static_cast<cudaStream_t>(call.where.stream);
  auto ready = std::make_shared<core::CudaEvent>();
  ready->record(user_stream);
  State* state = state_.get();
  const uint64_t ticket = state->gate.hold(user_stream);

  return worker.submit([state, call, world_size, ready, ticket, run_host = std::move(run_host)] {
    struct OpenOnExit {
      cuda::StreamGate& gate;
      uint64_t ticket;
      ~OpenOnExit() { gate.open(ticket); }  // never leave the caller's stream held, even on error
    } open_on_exit{state->gate, ticket};

    DTRAIN_CUDA_CHECK(cudaSetDevice(state->device));
    if (!state->copy_stream) state->copy_stream = std::make_unique<core::CudaStream>(state->device);
    const cudaStream_t copy = state->copy_stream->get();
    const size_t esize = core::dtype_size(call.dtype);
    const size_t send_bytes = send_elements(call, world_size) * esize;
    const size_t recv_bytes = recv_elements(call, world_size) * esize;
    grow(state->host_recv, recv_bytes, state->retired);
    auto* host_recv = static_cast<unsigned char*>(state->host_recv.data());

    // Keep the caller's in-place relation on the host side, so the host collective sees it too.
    Collective host_call = call;
    host_call.where = Location::host();
    host_call.recv = host_recv;
    const auto* device_recv = static_cast<const unsigned char*>(call.recv);
    const auto* device_send = static_cast<const unsigned char*>(call.send);
    const bool send_inside_recv = device_send >= device_recv && device_send + send_bytes <= device_recv + recv_bytes;
    if (send_inside_recv) {
      host_call.send = host_recv + (device_send - device_recv);
    } else if (device_recv >= device_send && device_recv + recv_bytes <= device_send + send_bytes) {
      // reduce_scatter in place: recv lies inside send. Stage send; recv maps into it.
      grow(state->host_send, send_bytes, state->retired);
      host_call.send = state->host_send.data();
      host_call.recv = static_cast<unsigned char*>(state->host_send.data()) + (device_recv - device_send);
    } else {
      grow(state->host_send, send_bytes, state->retired);
      host_call.send = state->host_send.data();
    }

    ready->make_stream_wait(copy);
    const void* staged_from = send_inside_recv ? call.recv : call.send;
    const size_t staged_bytes = send_inside_recv ? recv_bytes : send_bytes;
    void* staged_to = send_inside_recv ? host_recv : const_cast<void*>(host_call.send);
    if (staged_bytes > 0) {
      DTRAIN_CUDA_CHECK(cudaMemcpyAsync(staged_to, staged_from, staged_bytes, cudaMemcpyDeviceToHost, copy));
    }
    state->copy_stream->synchronize();

    run_host(host_call);

    if (recv_bytes > 0) {
      DTRAIN_CUDA_CHECK(cudaMemcpyAsync(call.recv, host_call.recv, recv_bytes, cudaMemcpyHostToDevice, copy));
    }
    state->copy_stream->synchronize();
  });
}

}  // namespace dtrain::comm
