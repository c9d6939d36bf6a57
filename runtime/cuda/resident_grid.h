#pragma once
// How many blocks of a kernel the current GPU holds at once. A grid-stride or row-strided kernel
// launched with exactly that many blocks runs in one wave on an otherwise idle GPU: every block
// starts at once and finishes together. (Kernels overlapping on another stream, an all-reduce
// during backward, take SMs; the grid then runs a partial second wave, which costs only time.) A grid a little larger
// than that runs a second, mostly empty wave (528 blocks of a kernel that fits 3 per SM on a 132-SM GPU ran 1.33 waves:
// a third of the time at a third of the occupancy).
#include <cstdint>

namespace dtrain::runtime::cuda {

// Blocks of `kernel` (a __global__ function's address) at `threads` per block and no dynamic shared
// memory that are resident at once on the current device: blocks per SM (from the kernel's
// registers and shared memory) x SMs. Cached per kernel and device; at least 1.
int resident_blocks(const void* kernel, int threads);

// A grid-stride launch over `work_items` items of `threads` per block: one block per `threads` items,
// at most one wave (resident_blocks).
unsigned one_wave_grid(const void* kernel, int threads, int64_t work_items);

// A __global__ function's address as the two above (and the runtime's occupancy API) take it.
template <typename... Args>
const void* kernel_address(void (*kernel)(Args...)) {
  return reinterpret_cast<const void*>(kernel);
}

}  // namespace dtrain::runtime::cuda
