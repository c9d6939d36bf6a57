#pragma once
// An all-reduce of host buffers (fp32, bf16, fp16: summed in fp32) through memory that every rank of one host maps: the
// mpi-ring's path for large host all-reduces when all of its ranks share a host. Open MPI's
// shared-memory transport copies every message into a FIFO and out again, one thread per rank
// (twice the bytes of a copy, and when it has no single-copy mechanism, as in containers without
// CMA, that is all it has); here each byte is written once into shared memory, summed by one rank
// and read back once.
//
// Each rank owns a segment (POSIX shared memory it creates and first touches, so its pages sit on
// its own NUMA node, mapped by every peer and unlinked once all have mapped it: only a kill during
// that setup can leave a file in /dev/shm): two counters, two input slots and two result pieces. The buffer
// is processed in chunks of chunk_bytes; for chunk k, on every rank:
//   1. copy its input chunk into its slot (k % 2), publish copied = k (fp32: all but its own
//      sub-range, which only it reads, and from its input);
//   2. wait until every rank has copied k, sum sub-range r of the chunk (r = this rank) over the
//      ranks' slots in rank order 0..n-1, times the scale, into its result piece (k % 2), publish
//      reduced = k;
//   3. copy its input chunk k + 1 into the other slot (publish copied = k + 1): the wait below
//      overlaps useful work;
//   4. wait until every rank has reduced k, copy every rank's result piece of chunk k out.
// Every element is summed by one chain in rank order, so the result is bitwise identical on every
// rank and from run to run, whichever rank sums it. Counters only grow (a sequence over all calls),
// so no reset is needed between calls; the slot a rank overwrites was last read before the
// counters it has already waited for, and a result piece is overwritten only after every rank has
// published the copy that follows its read (the comments in all_reduce() spell this out).
//
// Waits spin briefly (not at all with more ranks than cores), then yield, and after 50 ms sleep in
// short naps: a rank that never arrives (stopped, dead) leaves the others waiting inside an
// operation the stall inspector (stall_inspector.h) watches from its own thread, which reports and,
// at the abort time, ends the job, as for a ring waiting in MPI. Teardown is local (munmap): no
// collective, so a rank unwinding after an error cannot hang in it.
// Not thread-safe: one caller at a time (the communicator's worker).
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/memory/dtype.h"

namespace dtrain::comm {

class SharedMemoryAllReduce {
 public:
  // Collective over `comm`. Null on every rank when the ranks are not all on one
  // host (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) gives a smaller group) or when some rank cannot
  // create or map the shared memory; in that second case `why` (if given) says what failed.
  static std::unique_ptr<SharedMemoryAllReduce> create(MPI_Comm comm, size_t chunk_bytes, std::string* why = nullptr);
  ~SharedMemoryAllReduce();
  SharedMemoryAllReduce(const SharedMemoryAllReduce&) = delete;
  SharedMemoryAllReduce& operator=(const SharedMemoryAllReduce&) = delete;

  // recv = scale x sum over ranks of send, `count` elements of `dtype` (in place when send == recv).
  // fp32, or bf16 / fp16 widened into the slots and summed in fp32, the result (times the scale)
  // rounded once: the one rounding of the ring's widened path. Collective: every rank calls it with
  // the same count, dtype and scale.
  void all_reduce(const void* send, void* recv, size_t count, runtime::DType dtype, float scale);

  size_t chunk_floats() const { return chunk_; }

 private:
  struct Peer {
    unsigned char* base = nullptr;  // the peer's mapped segment
  };
  SharedMemoryAllReduce(int rank, int size, size_t chunk_floats);
  int64_t* copied(int r) const;
  int64_t* reduced(int r) const;
  float* slot(int r, int64_t seq) const;
  float* result(int r, int64_t seq) const;
  size_t segment_bytes() const;
  // Splits chunk `n` (elements) into the ranks' sub-ranges, in multiples of 32 floats.
  size_t piece(size_t n) const;
  // Sums this rank's sub-range of chunk `seq` (n elements) into its result piece; this rank's own
  // contribution is read from `own` (the chunk's first element), the others' from their slots.
  void reduce_piece(int64_t seq, size_t n, float scale, const float* own);
  // Waits until counter(r) >= seq for every rank r.
  void wait_all(int64_t* (SharedMemoryAllReduce::*counter)(int) const, int64_t seq) const;

  int rank_ = 0;
  int size_ = 1;
  size_t chunk_ = 0;         // floats per slot (a multiple of 32)
  size_t piece_floats_ = 0;  // floats per result piece: the largest sub-range of a chunk
  int spin_rounds_ = 64;     // rounds of a wait spent spinning before yielding (0 when oversubscribed)
  int64_t seq_ = 0;          // the last chunk's sequence number (counters start at 0)
  std::vector<Peer> peers_;
};

}  // namespace dtrain::comm
