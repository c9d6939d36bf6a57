// DeviceStaging for CUDA builds. The caller's stream is held by a StreamGate; the worker copies the
// input out once the stream reaches the call (an event), runs the host collective on pinned
// buffers, copies the result back, and opens the gate.
#include <cuda_runtime_api.h>

#include "comm/communicator.h"
#include <algorithm>
#include <vector>

#include "comm/cuda/convert_kernels.cuh"
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
  size_t piece_bytes = 0;
  cuda::StreamGate gate;
  // Created on the worker's first use. Two streams, so results flow back to the device while
  // later pieces are still being copied out (the GPU's copy engines run both directions at once).
  std::unique_ptr<core::CudaStream> copy_stream;    // device -> host
  std::unique_ptr<core::CudaStream> return_stream;  // host -> device
  std::vector<core::CudaEvent> piece_copied;        // one per piece of a pipelined all-reduce
  core::Buffer host_send;
  core::Buffer host_recv;
  std::vector<core::Buffer> retired;
};

namespace {

// A large all-reduce in pieces: every piece's device->host copy is queued at once, and piece k is
// all-reduced on the host as soon as it has landed, while later pieces are still copying and
// earlier results are already copying back. Element-wise reductions split freely into pieces.
void pipelined_all_reduce(DeviceStaging::State& state, const Collective& call, const unsigned char* host_in,
                          unsigned char* host_out, const std::function<void(const Collective&)>& run_host) {
  const size_t esize = core::dtype_size(call.dtype);
  const size_t piece = std::max<size_t>(1, state.piece_bytes / esize);
  const size_t pieces = (call.count + piece - 1) / piece;
  while (state.piece_copied.size() < pieces) state.piece_copied.emplace_back();
  const cudaStream_t out_stream = state.copy_stream->get();
  const cudaStream_t back_stream = state.return_stream->get();
  const auto* device_in = static_cast<const unsigned char*>(call.send);
  for (size_t k = 0; k < pieces; ++k) {
    const size_t at = k * piece * esize;
    const size_t bytes = std::min(piece, call.count - k * piece) * esize;
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(const_cast<unsigned char*>(host_in) + at, device_in + at, bytes,
                                      cudaMemcpyDeviceToHost, out_stream));
    state.piece_copied[k].record(out_stream);
  }
  for (size_t k = 0; k < pieces; ++k) {
    const size_t first = k * piece;
    const size_t n = std::min(piece, call.count - first);
    state.piece_copied[k].synchronize();
    Collective part = call;
    part.where = Location::host();
    part.count = n;
    part.send = host_in + first * esize;
    part.recv = host_out + first * esize;
    run_host(part);
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(static_cast<unsigned char*>(call.recv) + first * esize, host_out + first * esize,
                                      n * esize, cudaMemcpyHostToDevice, back_stream));
  }
  state.return_stream->synchronize();
}

}  // namespace

DeviceStaging::DeviceStaging(size_t piece_bytes) : state_(std::make_unique<State>()) {
  DTRAIN_CUDA_CHECK(cudaGetDevice(&state_->device));
  state_->piece_bytes = piece_bytes;
  cuda::load_kernels();  // before any stream is held (convert_kernels.cuh says why)
}

DeviceStaging::~DeviceStaging() = default;

namespace {

// The frame of both paths: holds the caller's stream at `call`, then on the worker runs `check`
// (once for the whole call, before any data moves), selects the device and runs `body` with an
// event the caller's stream recorded at the call. The gate opens when body returns or throws, so
// the caller's stream is never left held.
Work run_holding_stream(DeviceStaging::State& state, CommWorker& worker, const Collective& call,
                        std::function<void(const Collective&)> check,
                        std::function<void(const core::CudaEvent& ready)> body) {
  const auto user_stream = static_cast<cudaStream_t>(call.where.stream);
  auto ready = std::make_shared<core::CudaEvent>();
  ready->record(user_stream);
  const uint64_t ticket = state.gate.hold(user_stream);
  return worker.submit([&state, call, ready, ticket, check = std::move(check), body = std::move(body)] {
    struct OpenOnExit {
      cuda::StreamGate& gate;
      uint64_t ticket;
      ~OpenOnExit() { gate.open(ticket); }
    } open_on_exit{state.gate, ticket};
    check(call);
    DTRAIN_CUDA_CHECK(cudaSetDevice(state.device));
    body(*ready);
  });
}

}  // namespace

Work DeviceStaging::run(CommWorker& worker, const Collective& call, int world_size,
                        std::function<void(const Collective&)> check, std::function<void(const Collective&)> run_host) {
  State* state = state_.get();
  auto stage = [state, call, world_size, run_host = std::move(run_host)](const core::CudaEvent& ready) {
    if (!state->copy_stream) {
      state->copy_stream = std::make_unique<core::CudaStream>(state->device);
      state->return_stream = std::make_unique<core::CudaStream>(state->device);
    }
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

    ready.make_stream_wait(copy);
    if (call.kind == CollectiveKind::kAllReduce && recv_bytes > state->piece_bytes) {
      pipelined_all_reduce(*state, call, static_cast<const unsigned char*>(host_call.send), host_recv, run_host);
      return;
    }
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
  };
  return run_holding_stream(*state, worker, call, std::move(check), std::move(stage));
}

Work DeviceStaging::run_direct(CommWorker& worker, const Collective& call, std::function<void(const Collective&)> check,
                               std::function<void(const Collective&)> run_device) {
  return run_holding_stream(*state_, worker, call, std::move(check),
                            [call, run_device = std::move(run_device)](const core::CudaEvent& ready) {
                              ready.synchronize();  // the caller's earlier work on these buffers is done
                              run_device(call);
                            });
}

}  // namespace dtrain::comm
