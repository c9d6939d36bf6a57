#include "comm/host/memory_ops.h"

#include <cstring>

#include "comm/host/host_reduce.h"

namespace dtrain::comm {

namespace detail {
// Device halves: memory_ops_cuda.cc, or memory_ops_cpu.cc (which throws).
void device_copy_bytes(void* dst, const void* src, size_t bytes, void* stream);
void device_zero_bytes(void* dst, size_t bytes, void* stream);
void device_widen(const void* src, DType dtype, float* dst, size_t n, void* stream);
void device_narrow(const float* src, float scale, void* dst, DType dtype, size_t n, void* stream);
}  // namespace detail

void copy_bytes(void* dst, const void* src, size_t bytes, Location where) {
  if (bytes == 0 || dst == src) return;
  if (where.device) return detail::device_copy_bytes(dst, src, bytes, where.stream);
  std::memmove(dst, src, bytes);
}

void zero_bytes(void* dst, size_t bytes, Location where) {
  if (bytes == 0) return;
  if (where.device) return detail::device_zero_bytes(dst, bytes, where.stream);
  std::memset(dst, 0, bytes);
}

void widen_to_f32(const void* src, DType dtype, float* dst, size_t n, Location where) {
  if (n == 0) return;
  if (where.device) return detail::device_widen(src, dtype, dst, n, where.stream);
  widen_to_f32(src, dtype, dst, n);
}

void narrow_from_f32(const float* src, float scale, void* dst, DType dtype, size_t n, Location where) {
  if (n == 0) return;
  if (where.device) return detail::device_narrow(src, scale, dst, dtype, n, where.stream);
  narrow_from_f32(src, scale, dst, dtype, n);
}

runtime::Buffer scratch_buffer(size_t bytes, Location where) {
  return where.device ? runtime::Buffer(runtime::MemoryKind::kDevice, bytes, where.stream)
                      : runtime::Buffer(runtime::MemoryKind::kHost, bytes);
}

}  // namespace dtrain::comm
