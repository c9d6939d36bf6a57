#pragma once
// Copies, fills and dtype conversions on collective buffers, on the host or (Location::gpu) as
// kernels and async copies on the call's stream. Lets composite backends (hierarchical) and the
// NCCL backend express their glue once for both kinds of memory.
#include <cstddef>

#include "comm/collective.h"
#include "runtime/memory/buffer.h"

namespace dtrain::comm {

void copy_bytes(void* dst, const void* src, size_t bytes, Location where);
void zero_bytes(void* dst, size_t bytes, Location where);
// fp32/fp16/bf16 -> fp32.
void widen_to_f32(const void* src, DType dtype, float* dst, size_t n, Location where);
// fp32 x scale -> dtype, rounded once.
void narrow_from_f32(const float* src, float scale, void* dst, DType dtype, size_t n, Location where);

// Scratch memory where `where` says: host memory, or device memory from the caching allocator,
// tagged with the call's stream, so it may be released as soon as the work is enqueued.
runtime::Buffer scratch_buffer(size_t bytes, Location where);

}  // namespace dtrain::comm
