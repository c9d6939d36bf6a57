#pragma once
// Owned, typed-agnostic memory of one of three kinds. Move-only; freed on destruction.
#include <cstddef>

namespace dtrain::runtime {

enum class MemoryKind { kHost, kPinnedHost, kDevice };

class Buffer {
 public:
  Buffer() = default;
  // kHost: 64-byte aligned host memory (vector loads, no false sharing between threads).
  // kPinnedHost: page-locked (cudaHostAlloc) when a GPU is usable, so copies can be asynchronous;
  //   otherwise aligned host memory, since a CPU-only run has nothing to pin for (see is_page_locked).
  // kDevice: from the current device's caching allocator; an Error without a CUDA build and a GPU.
  //   `stream` (a cudaStream_t, or 0) is the stream the memory is used on: once released, the block
  //   is reused only by allocations for that stream, so stream order keeps earlier work safe.
  Buffer(MemoryKind kind, size_t bytes, void* stream = nullptr);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  MemoryKind kind() const { return kind_; }
  int device() const { return device_; }  // -1 for host memory
  bool is_page_locked() const { return page_locked_; }

 private:
  void release() noexcept;

  void* data_ = nullptr;
  size_t bytes_ = 0;
  MemoryKind kind_ = MemoryKind::kHost;
  int device_ = -1;
  bool page_locked_ = false;
};

namespace detail {
// Implemented by memory_backend_cuda.cc in CUDA builds and memory_backend_cpu.cc otherwise.
void* allocate_page_locked(size_t bytes);  // nullptr when no GPU is usable
void free_page_locked(void* ptr) noexcept;
void* allocate_device(size_t bytes, void* stream, int* device);  // throws without CUDA or GPU
void free_device(void* ptr, int device) noexcept;
}  // namespace detail

}  // namespace dtrain::runtime
