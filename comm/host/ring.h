#pragma once
// Our ring collectives over MPI point-to-point (the mpi-ring backend's data plane), on host memory,
// or on device memory when the MPI library accepts device pointers (ring_memory.h).
//
// All-reduce is bandwidth-optimal: a reduce-scatter then an all-gather around the ring, 2(n-1)
// steps, each rank sending 2(n-1)/n of the buffer. Every chunk is cut into segments, received into
// two small rotating buffers that stay in cache, and reduced as soon as each lands, while the next
// segment is already in flight (Isend/Irecv). fp32 only: callers widen 16-bit data first, so the
// reduction rounds once.
//
// Small buffers (below small_bytes) use recursive doubling instead, which needs log2(n) (+2 when n
// is not a power of two) message latencies instead of 2(n-1).
//
// Every rank ends with bitwise identical results: each element is summed by one chain (ring) or
// by commutative pairwise sums (recursive doubling).
// Not thread-safe: one caller at a time per communicator (CommWorker guarantees it).
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "comm/host/ring_memory.h"
#include "comm/host/ring_scratch.h"
#include "runtime/memory/dtype.h"

namespace dtrain::comm {

struct RingTuning {
  size_t segment_bytes = 256 * 1024;  // DTRAIN_RING_SEGMENT_BYTES
  size_t small_bytes = 16 * 1024;     // DTRAIN_RING_SMALL_BYTES: recursive doubling at or below this
  int lanes = 2;                      // DTRAIN_RING_LANES: rings side by side for large host all-reduces (ring_lanes.h)
  // The mpi-ring's shared-memory all-reduce (shared_memory_allreduce.h) for host buffers of at
  // least shm_min_bytes when every rank is on one host.
  bool shm = true;                      // DTRAIN_SHM_ALLREDUCE (0 or 1)
  size_t shm_min_bytes = 8 * 1024;      // DTRAIN_SHM_MIN_BYTES
  size_t shm_chunk_bytes = 512 * 1024;  // DTRAIN_SHM_CHUNK_BYTES: a rank's slot per step
};

// Reads DTRAIN_RING_SEGMENT_BYTES, DTRAIN_RING_SMALL_BYTES, DTRAIN_RING_LANES and the DTRAIN_SHM_*
// variables (UsageError if malformed).
RingTuning ring_tuning_from_env();

// Collective over `comm`: a UsageError on every rank, naming the variable and both values, unless
// every rank has the same tuning.
void check_same_tuning(MPI_Comm comm, const RingTuning& tuning);

// Element offsets of n chunks of `count` elements, sizes differing by at most one: offsets[i]..offsets[i+1].
std::vector<size_t> even_chunks(size_t count, int n);

class Ring {
 public:
  // Buffers passed in live in `memory`'s kind of memory (host by default).
  Ring(MPI_Comm comm, RingTuning tuning, std::unique_ptr<RingMemory> memory = make_host_ring_memory());

  RingMemory& memory() { return *memory_; }
  // The ring's scratch buffer for `slot`, at least `count` floats in memory()'s kind (ring_scratch.h).
  float* scratch(RingScratch::Slot slot, size_t count) { return scratch_.get(slot, count); }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // recv = scale x sum over ranks of send (count elements; in place when send == recv).
  void all_reduce(const float* send, float* recv, size_t count, float scale);

  // Chunk r of the sum, scaled, lands in recv + offsets[r] on rank r (other chunks of recv are
  // scratch: clobbered). send and recv both span offsets.back() elements; send == recv allowed.
  void reduce_scatter(const float* send, float* recv, const std::vector<size_t>& offsets, float scale);

  // 16-bit all-reduce in place that carries the partial sums in 16 bits (bf16 or fp16): half the
  // bytes of the fp32 reduce-scatter. Each hop adds in fp32 and rounds the partial sum once, so an
  // element is rounded n-1 times (once on 2 ranks). Host memory, 2 or more ranks, count >= ranks.
  // The result is bitwise the same on every rank (the all-gather copies each owner's chunk).
  void all_reduce_16(void* data, size_t count, runtime::DType dtype, float scale);

  // Rank r's block already sits at buffer + offsets[r] x element_bytes; afterwards every block is
  // everywhere. Byte-oriented: any element type.
  void all_gather(void* buffer, const std::vector<size_t>& offsets, size_t element_bytes);

  // Pipelined chain from `root` around the ring.
  void broadcast(void* buffer, size_t bytes, int root);

 private:
  // One reduce-scatter step: send `send_n` floats to the right; receive `recv_n` floats from the
  // left, segment by segment, writing acc_out[i] = (acc_in[i] + incoming[i]) * scale.
  void exchange_and_reduce(const float* send, size_t send_n, const float* acc_in, float* acc_out, size_t recv_n,
                           float scale);
  // The 16-bit reduce-scatter step: as exchange_and_reduce, 2-byte elements, in place on acc.
  void exchange_and_reduce_16(const void* send, size_t send_n, void* acc, size_t recv_n, runtime::DType dtype,
                              float scale);
  // What both steps share: send `send_n` elements of `element_bytes` to the right in segments;
  // receive `recv_n` from the left into two rotating scratch segments, calling
  // reduce(first element, incoming, n) for each segment as it lands.
  void exchange_segments(const void* send, size_t send_n, size_t recv_n, size_t element_bytes,
                         const std::function<void(size_t, const void*, size_t)>& reduce);
  // One all-gather step: send `send_bytes`, receive `recv_bytes` straight into place.
  void exchange(const void* send, size_t send_bytes, void* recv, size_t recv_bytes);
  void recursive_doubling(const float* send, float* recv, size_t count, float scale);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  int left_ = 0;
  int right_ = 0;
  RingTuning tuning_;
  std::unique_ptr<RingMemory> memory_;
  RingScratch scratch_;  // after memory_: its buffers are returned to memory_ before memory_ goes
  std::vector<MPI_Request> requests_;
};

}  // namespace dtrain::comm
