#pragma once
// Runs a host-side collective on device buffers (the mpi-ring and mpi backends on GPU memory).
//
// Staged (run): everything that touches CUDA is enqueued on the calling thread, at the call:
//   the caller's stream records where the call stands; a copy stream waits for it and copies the
//   input out, piece by piece, into a small ring of reused pinned buffers, and flags each piece
//   as landed; a return stream waits, piece by piece, for the host to flag the piece reduced,
//   copies it back, and the caller's stream waits for the last copy back (an event).
// The communicator's worker thread then only waits for the landed flags (plain memory reads),
// runs the host collective on each piece and raises the reduced flag (a plain store): it makes no
// CUDA call at all. So nothing that the GPU waits for depends on a host thread that might itself
// be stuck in the CUDA driver (stream_flag.cuh says when that happens: another thread's first
// launch of a kernel, a cudaFree...). For the same reason the worker is handed the call before any
// of it is enqueued: a stream never waits for a job that the worker does not have yet, whatever
// the enqueuing thread is blocked on. All-reduce and broadcast run in pieces: the copy out of piece
// k+1, the host collective on piece k and the copy back of piece k-1 are in flight at once.
// All-gather and reduce-scatter need the whole buffer on the host: one piece in buffers grown at
// the call (outgrown ones are kept, never freed while work may use them).
//
// Direct (run_direct): for MPIs that take device pointers. The worker runs the collective on the
// device buffers (MPI and the ring's kernels call CUDA), while the caller's stream is held at the
// call. The hazard above applies: do not run it beside threads that load kernels lazily.
//
// DTRAIN_STAGING_TRACE=PREFIX writes a per-rank trace of the staged pieces (device_staging_cuda.cc).
//
// Builds without CUDA get an implementation that throws: there are no device buffers to stage.
// Calls may come from several threads; each is enqueued and handed to the worker as one step.
#include <cstddef>
#include <functional>
#include <memory>

#include "comm/collective.h"
#include "comm/host/comm_worker.h"

namespace dtrain::comm {

class DeviceStaging {
 public:
  // All-reduces and broadcasts go in pieces of piece_bytes through `slots` pinned buffers
  // (DTRAIN_STAGING_PIECE_BYTES). Every rank must use the same piece size.
  DeviceStaging(size_t piece_bytes, int slots = 4);
  ~DeviceStaging();  // waits for its copies; call after the worker has run everything queued
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // On `worker`'s thread: `check` gets the original call once; `run_host` gets the call (or each
  // piece of it) rewritten onto pinned host buffers. A failure fails the returned Work (one while
  // enqueuing throws here), and the streams are released all the same (the device result is then
  // undefined).
  Work run(CommWorker& worker, const Collective& call, int world_size, int rank,
           std::function<void(const Collective&)> check, std::function<void(const Collective&)> run_host);

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
