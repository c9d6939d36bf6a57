// DeviceStaging for CUDA builds (device_staging.h describes both paths and why the worker of the
// staged path never calls CUDA).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/cuda/convert_kernels.cuh"
#include "comm/cuda/stream_flag.cuh"
#include "comm/host/device_staging.h"
#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/base/process_identity.h"
#include "runtime/base/steady_seconds.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"
#include "runtime/memory/buffer.h"

namespace dtrain::comm {
namespace {

// One piece of a staged call: the host collective on pinned memory, its ticket (the value of the
// `landed` flag once its input is on the host, and of `reduced` once the host is done), and its
// copies: `out_bytes` from `device_in` to `host_in`, then `back_bytes` from `host_out` to
// `device_out`, the host memory guarded by `free` (recorded once the copy back is done).
struct Piece {
  uint64_t ticket = 0;
  Collective host_call;
  const void* device_in = nullptr;
  void* host_in = nullptr;
  size_t out_bytes = 0;
  void* device_out = nullptr;
  const void* host_out = nullptr;
  size_t back_bytes = 0;
  runtime::CudaEvent* free = nullptr;
};

// Grows a pinned buffer at the call. The old one is kept, not freed: queued copies and queued host
// collectives may still use it, and cudaFreeHost would wait for the whole device.
void grow(runtime::Buffer& buffer, size_t bytes, std::vector<runtime::Buffer>& retired) {
  if (buffer.bytes() >= bytes) return;
  const size_t size = std::max(bytes, 2 * buffer.bytes());
  if (buffer.data() != nullptr) retired.push_back(std::move(buffer));
  buffer = runtime::Buffer(runtime::MemoryKind::kPinnedHost, size);
}

bool lies_inside(const unsigned char* inner, size_t inner_bytes, const unsigned char* outer, size_t outer_bytes) {
  return inner >= outer && inner + inner_bytes <= outer + outer_bytes;
}

}  // namespace

// DTRAIN_STAGING_TRACE=PREFIX: each rank writes PREFIX.rankN at the end, one line per piece of the
// staged calls: when the call was enqueued, when its input had landed on the host, and when the
// host collective was done (ms since the first call), and its bytes. For finding out where a
// staged step spends its time.
struct StagingTrace {
  struct Line {
    uint64_t ticket;
    double enqueued_ms, landed_ms, reduced_ms;
    size_t bytes;
  };
  std::string path;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::vector<Line> lines;
  std::mutex mutex;  // the enqueuing thread and the worker

  double now_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  ~StagingTrace() {
    if (path.empty()) return;
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      std::fprintf(f, "# ticket enqueued_ms landed_ms reduced_ms bytes\n");
      for (const Line& l : lines) {
        std::fprintf(f, "%llu %.3f %.3f %.3f %zu\n", static_cast<unsigned long long>(l.ticket), l.enqueued_ms,
                     l.landed_ms, l.reduced_ms, l.bytes);
      }
      std::fclose(f);
    }
  }
};

struct DeviceStaging::State {
  explicit State(int device_index) : device(device_index), out(device_index), back(device_index) {
    if (auto prefix = runtime::env_string("DTRAIN_STAGING_TRACE")) {
      trace = std::make_unique<StagingTrace>();
      trace->path = *prefix + ".rank" + std::to_string(runtime::process_identity().world_rank);
    }
  }
  std::unique_ptr<StagingTrace> trace;

  int device = 0;
  size_t piece_bytes = 0;
  // Held while a call is enqueued and handed to the worker: tickets must reach the worker in order.
  std::mutex submit_mutex;
  runtime::CudaStream out;   // device -> host copies
  runtime::CudaStream back;  // host -> device copies (both directions run at once on the copy engines)
  runtime::CudaEvent ready;  // the caller's stream at the call
  runtime::CudaEvent done;   // the last copy back of the call
  cuda::StreamFlag landed;   // raised by `out` once a piece is on the host
  cuda::StreamFlag reduced;  // raised by the worker once the host collective of a piece is done
  uint64_t next_ticket = 0;
  // All-reduce and broadcast pieces rotate through these; a slot is refilled only after its
  // previous piece went back (slot_free, recorded on `back`).
  std::vector<runtime::Buffer> slots;
  std::vector<runtime::CudaEvent> slot_free;
  size_t next_slot = 0;
  // All-gather and reduce-scatter: the whole buffers.
  runtime::Buffer whole_send, whole_recv;
  runtime::CudaEvent whole_free;
  std::vector<runtime::Buffer> retired;
  // The direct path: the caller's stream raises `reached` at the call and waits for `opened`.
  cuda::StreamFlag reached, opened;
  uint64_t next_gate = 0;
};

DeviceStaging::DeviceStaging(size_t piece_bytes, int slots) {
  DTRAIN_CHECK(piece_bytes > 0 && slots > 0) << "device staging needs pieces and slots";
  int device = 0;
  DTRAIN_CUDA_CHECK(cudaGetDevice(&device));
  cuda::load_kernels();  // the direct path's worker launches them while the caller's stream is held
  state_ = std::make_unique<State>(device);
  state_->piece_bytes = piece_bytes;
  for (int i = 0; i < slots; ++i) {
    state_->slots.emplace_back(runtime::MemoryKind::kPinnedHost, piece_bytes);
    state_->slot_free.emplace_back();
  }
}

DeviceStaging::~DeviceStaging() {
  // The worker has run everything queued (every flag it owes is raised), so these finish.
  cudaStreamSynchronize(state_->out.get());
  cudaStreamSynchronize(state_->back.get());
}

namespace {

// A copy of a piece, reported to the call's trace (call_trace.h) around its enqueueing.
void traced_copy(const Collective& call, int piece, const char* phase, void* to, const void* from, size_t bytes,
                 cudaMemcpyKind kind, cudaStream_t stream) {
  CallPhase p;
  p.name = phase;
  p.bytes = static_cast<int64_t>(bytes);
  p.piece = piece;
  if (call.trace) call.trace->device_phase(p, stream, false);
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, kind, stream));
  if (call.trace) call.trace->device_phase(p, stream, true);
}

// Enqueues piece number `index` of `call`: copy it out (once `free` says its host memory is no
// longer being copied back), flag it landed, wait for the host, copy it back, record `free`.
void enqueue_piece(DeviceStaging::State& s, const Collective& call, int index, const Piece& piece) {
  piece.free->make_stream_wait(s.out.get());
  if (piece.out_bytes > 0) {
    traced_copy(call, index, kPhaseDeviceToHost, piece.host_in, piece.device_in, piece.out_bytes,
                cudaMemcpyDeviceToHost, s.out.get());
  }
  s.landed.enqueue_set(s.out.get(), piece.ticket);
  s.reduced.enqueue_wait(s.back.get(), piece.ticket);
  if (piece.back_bytes > 0) {
    traced_copy(call, index, kPhaseHostToDevice, piece.device_out, piece.host_out, piece.back_bytes,
                cudaMemcpyHostToDevice, s.back.get());
  }
  piece.free->record(s.back.get());
}

// The host side of a piece, on pinned host memory; the staging reports the pieces itself.
Collective host_call_of(const Collective& call, size_t count, void* send, void* recv) {
  Collective host = call;
  host.trace = nullptr;
  host.where = Location::host();
  host.count = count;
  host.send = send;
  host.recv = recv;
  return host;
}

// All-reduce and broadcast: element-wise, so they split into pieces freely. A broadcast's root
// only copies out, the other ranks only copy back. Hands out tickets and slots; enqueues nothing.
std::vector<Piece> plan_in_pieces(DeviceStaging::State& s, const Collective& call, int rank) {
  const size_t esize = runtime::dtype_size(call.dtype);
  const size_t per_piece = std::max<size_t>(1, s.piece_bytes / esize);
  const bool broadcast = call.kind == CollectiveKind::kBroadcast;
  const bool copy_out = !broadcast || rank == call.root;
  const bool copy_back = !broadcast || rank != call.root;
  const auto* device_in = static_cast<const unsigned char*>(call.send);
  auto* device_out = static_cast<unsigned char*>(call.recv);
  std::vector<Piece> pieces;
  for (size_t first = 0; first < call.count; first += per_piece) {
    const size_t n = std::min(per_piece, call.count - first);
    const size_t slot = s.next_slot++ % s.slots.size();
    void* host = s.slots[slot].data();
    Piece piece;
    piece.ticket = ++s.next_ticket;
    piece.host_call = host_call_of(call, n, host, host);
    piece.device_in = device_in + first * esize;
    piece.host_in = host;
    piece.out_bytes = copy_out ? n * esize : 0;
    piece.device_out = device_out + first * esize;
    piece.host_out = host;
    piece.back_bytes = copy_back ? n * esize : 0;
    piece.free = &s.slot_free[slot];
    pieces.push_back(piece);
  }
  return pieces;
}

// All-gather and reduce-scatter: one piece, the whole buffers (grown here), keeping the caller's
// in-place relation on the host so the host collective sees it too. Enqueues nothing.
std::vector<Piece> plan_whole(DeviceStaging::State& s, const Collective& call, int world_size) {
  const size_t esize = runtime::dtype_size(call.dtype);
  const size_t send_bytes = send_elements(call, world_size) * esize;
  const size_t recv_bytes = recv_elements(call, world_size) * esize;
  if (send_bytes == 0 && recv_bytes == 0) return {};
  grow(s.whole_send, send_bytes, s.retired);
  grow(s.whole_recv, recv_bytes, s.retired);
  const auto* device_send = static_cast<const unsigned char*>(call.send);
  auto* device_recv = static_cast<unsigned char*>(call.recv);
  auto* host_send = static_cast<unsigned char*>(s.whole_send.data());
  auto* host_recv = static_cast<unsigned char*>(s.whole_recv.data());
  if (lies_inside(device_send, send_bytes, device_recv, recv_bytes)) {  // all-gather in place
    host_send = host_recv + (device_send - device_recv);
  } else if (lies_inside(device_recv, recv_bytes, device_send, send_bytes)) {  // reduce-scatter in place
    host_recv = host_send + (device_recv - device_send);
  }
  Piece piece;
  piece.ticket = ++s.next_ticket;
  piece.host_call = host_call_of(call, call.count, host_send, host_recv);
  piece.device_in = device_send;
  piece.host_in = host_send;
  piece.out_bytes = send_bytes;
  piece.device_out = device_recv;
  piece.host_out = host_recv;
  piece.back_bytes = recv_bytes;
  piece.free = &s.whole_free;
  return {piece};
}

// The stream side of a planned call, on the calling thread.
void enqueue_call(DeviceStaging::State& s, const Collective& call, const std::vector<Piece>& pieces) {
  const auto user = static_cast<cudaStream_t>(call.where.stream);
  s.ready.record(user);
  s.ready.make_stream_wait(s.out.get());
  for (size_t i = 0; i < pieces.size(); ++i) enqueue_piece(s, call, static_cast<int>(i), pieces[i]);
  if (!pieces.empty()) {
    s.done.record(s.back.get());
    s.done.make_stream_wait(user);
  }
}

// The worker's side of a staged call: for each piece, wait until it has landed, run the host
// collective, raise `reduced`. `abandoned`: the calling thread failed to enqueue the call, so some
// piece never lands; the job then fails, releasing the return stream all the same.
std::function<void()> host_job(DeviceStaging::State& s, const Collective& call, std::vector<Piece> pieces,
                               std::shared_ptr<const std::atomic<bool>> abandoned,
                               std::function<void(const Collective&)> check,
                               std::function<void(const Collective&)> run_host) {
  const double enqueued_ms = s.trace ? s.trace->now_ms() : 0.0;
  return [&s, call, enqueued_ms, pieces = std::move(pieces), abandoned = std::move(abandoned), check = std::move(check),
          run_host = std::move(run_host)] {
    // However this ends, the return stream (and so the caller's stream) goes on past this call.
    struct ReleaseOnExit {
      cuda::StreamFlag& reduced;
      uint64_t last;
      ~ReleaseOnExit() {
        if (last > 0 && reduced.value() < last) reduced.set(last);
      }
    } release{s.reduced, pieces.empty() ? 0 : pieces.back().ticket};
    check(call);
    for (size_t i = 0; i < pieces.size(); ++i) {
      const Piece& piece = pieces[i];
      // A later call's tickets raise `landed` past an abandoned piece's too: ask again after.
      if (!s.landed.wait_at_least(piece.ticket, abandoned.get()) || *abandoned)
        DTRAIN_FAIL() << describe(call) << ": abandoned, its copies could not be enqueued";
      const double landed_ms = s.trace ? s.trace->now_ms() : 0.0;
      CallPhase ring;  // reported before the flag: the copy back (and so the call) waits for it
      ring.begin = call.trace ? runtime::steady_seconds() : 0.0;
      run_host(piece.host_call);
      if (call.trace) {
        ring.name = kPhaseHostRing;
        ring.bytes = static_cast<int64_t>(piece.host_call.count * runtime::dtype_size(piece.host_call.dtype));
        ring.piece = static_cast<int>(i);
        ring.end = runtime::steady_seconds();
        call.trace->host_phase(ring);
      }
      s.reduced.set(piece.ticket);
      if (s.trace) {
        std::lock_guard trace_lock(s.trace->mutex);
        s.trace->lines.push_back({piece.ticket, enqueued_ms, landed_ms, s.trace->now_ms(),
                                  piece.host_call.count * runtime::dtype_size(piece.host_call.dtype)});
      }
    }
  };
}

}  // namespace

Work DeviceStaging::run(CommWorker& worker, const Collective& call, int world_size, int rank,
                        std::function<void(const Collective&)> check, std::function<void(const Collective&)> run_host) {
  State& s = *state_;
  std::lock_guard lock(s.submit_mutex);
  runtime::DeviceGuard on(s.device);
  const bool in_pieces = call.kind == CollectiveKind::kAllReduce || call.kind == CollectiveKind::kBroadcast;
  // Tickets, slots and host buffers first (growing them may call CUDA): no stream waits for this
  // call yet.
  const std::vector<Piece> pieces = in_pieces ? plan_in_pieces(s, call, rank) : plan_whole(s, call, world_size);
  // The worker gets the call before any stream waits for it. Once a piece's wait for `reduced` is
  // on the return stream, only this call's job can release it, and the CUDA calls that follow here
  // (the next pieces, the events) can block behind another thread of the process that holds the
  // context while the device drains (a kernel's first launch under lazy module loading, cudaFree):
  // the drain would wait for the return stream, the return stream for the worker, and the worker
  // for a job this thread had not handed it yet. The job polls `landed`, so it may start first.
  auto abandoned = std::make_shared<std::atomic<bool>>(false);
  Work work = worker.submit(host_job(s, call, pieces, abandoned, std::move(check), std::move(run_host)));
  try {
    enqueue_call(s, call, pieces);
  } catch (...) {
    abandoned->store(true);  // the job fails at the first piece that did not land
    throw;
  }
  return work;
}

Work DeviceStaging::run_direct(CommWorker& worker, const Collective& call, std::function<void(const Collective&)> check,
                               std::function<void(const Collective&)> run_device) {
  State& s = *state_;
  std::lock_guard lock(s.submit_mutex);
  runtime::DeviceGuard on(s.device);
  const auto user = static_cast<cudaStream_t>(call.where.stream);
  const uint64_t ticket = ++s.next_gate;
  s.reached.enqueue_set(user, ticket);
  s.opened.enqueue_wait(user, ticket);
  return worker.submit([&s, call, ticket, check = std::move(check), run_device = std::move(run_device)] {
    struct OpenOnExit {
      cuda::StreamFlag& opened;
      uint64_t ticket;
      ~OpenOnExit() { opened.set(ticket); }
    } open_on_exit{s.opened, ticket};
    s.reached.wait_at_least(ticket);  // the caller's earlier work on these buffers is done
    check(call);
    DTRAIN_CUDA_CHECK(cudaSetDevice(s.device));
    run_device(call);
  });
}

}  // namespace dtrain::comm
