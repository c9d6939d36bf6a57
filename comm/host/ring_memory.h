#pragma once
// Where the ring's data lives and how it is combined: host memory with vectorized loops, or device
// memory with kernels, for MPI libraries that accept device pointers (CUDA-aware MPI). The ring
// algorithm (ring.h) is the same for both; only its scratch buffers (ring_scratch.h) and arithmetic
// differ.
// Every operation has finished when it returns: its result is handed to MPI next.
// Used by one thread at a time (the communicator's worker; the mpi-ring's managed wire buffers
// come from a RingMemory of their own, under that communicator's lock).
#include <cstddef>
#include <memory>

#include "comm/collective.h"

namespace dtrain::comm {

class RingMemory {
 public:
  virtual ~RingMemory() = default;
  // A buffer of `count` floats (count >= 1) in this memory. RingScratch (ring_scratch.h), the
  // owner of the ring's buffers, asks for them (and mpi-ring for its direct-managed wire). Dropping the handle frees a
  // host buffer; device buffers are freed when this RingMemory goes, since cudaFree synchronizes the whole device.
  using Block = std::unique_ptr<float, void (*)(float*)>;
  virtual Block allocate(size_t count) = 0;
  // out[i] = (a[i] + b[i]) * scale. `out` may be `a`; `b` must not overlap `out`.
  virtual void add_scaled(float* out, const float* a, const float* b, size_t n, float scale) = 0;
  // out[i] = in[i] * scale (in place allowed).
  virtual void scale_copy(float* out, const float* in, size_t n, float scale) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // Where memory_ops calls on this memory run (the device variant's own stream), and a wait for
  // them to finish.
  virtual Location where() const = 0;
  virtual void wait() = 0;
};

std::unique_ptr<RingMemory> make_host_ring_memory();

// Device memory on the current device, with its own stream. managed: scratch in CUDA managed
// memory, which even an MPI without CUDA support can read and write (through page migration):
// how the direct path is tested where no CUDA-aware MPI exists. Throws in builds without CUDA.
std::unique_ptr<RingMemory> make_device_ring_memory(bool managed);

}  // namespace dtrain::comm
