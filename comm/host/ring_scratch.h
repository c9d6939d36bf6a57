#pragma once
// The ring's scratch buffers: one per use, kept between calls and grown on demand, in the ring's
// memory (host, or device memory for MPI libraries that take device pointers). Every use is named
// in one table below, so no two users can pick the same buffer.
//
// Owner: the Ring (ring.h), which holds one RingScratch for its whole life, created after and
// destroyed before its RingMemory (which allocates the buffers, and frees the device ones).
// Borrowers: the ring's own steps (two rotating receive segments, recursive doubling's receive
// buffer) and the mpi-ring communicator (its fp32 copy of 16-bit data, its 16-bit wire copy of fp32
// data), both through
// Ring::scratch. A borrowed pointer stays valid until the same slot is asked for more floats than
// it holds, or the ring goes.
// Used by one thread at a time, as the Ring.
#include <cstddef>

#include "comm/host/ring_memory.h"

namespace dtrain::comm {

class RingScratch {
 public:
  enum Slot {
    kSegment0,  // the ring's receive segments, rotating: one lands while the other is reduced
    kSegment1,
    kIncoming,  // recursive doubling's receive buffer
    kWiden,     // the mpi-ring communicator's fp32 copy of 16-bit data (wide_reduction.h)
    kWire,      // the mpi-ring communicator's 16-bit wire copy of fp32 host data
    kSlots
  };

  explicit RingScratch(RingMemory& memory) : memory_(memory) {}
  RingScratch(const RingScratch&) = delete;
  RingScratch& operator=(const RingScratch&) = delete;

  // At least `count` floats for `slot` (null while a slot has never held any).
  float* get(Slot slot, size_t count);

 private:
  struct Buffer {
    RingMemory::Block block{nullptr, nullptr};
    size_t count = 0;
  };
  RingMemory& memory_;
  Buffer slots_[kSlots];
};

}  // namespace dtrain::comm
