#pragma once
// The per-device caching allocator (caching_allocator.h over cudaMalloc/cudaFree). Device
// Buffers and tensors come from here, so steady-state training calls no cudaMalloc.
#include "runtime/memory/caching_allocator.h"

namespace dtrain::runtime {

// The allocator of `device`, created on first use and alive until exit.
CachingAllocator& device_caching_allocator(int device);

}  // namespace dtrain::runtime
