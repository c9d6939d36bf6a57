#pragma once
// A caching allocator: freed blocks are kept and handed out again, so a training loop whose
// allocation pattern repeats every step stops calling the raw allocator (cudaMalloc) after the
// first step.
//
// Sizes are rounded to size classes (512 B steps up to 1 MiB, then 64 steps between powers of two,
// at most 1/64 slack: the in-use bytes stay close to what was asked for, where ResNet's tensors,
// 2^k x 49 elements, lost 14% to coarser classes). A request takes the smallest cached block of
// its stream tag that fits it and is at most an eighth larger, so a block serves nearby sizes
// too (cuDNN workspaces differ from layer to layer). A block is never reused on another stream
// tag: device work queued on one stream may still read a block that the host has already
// released, so reuse on another stream would race. When the raw allocator fails, every cached block
// is returned and the allocation retried once before the error is thrown.
// Thread-safe.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace dtrain::runtime {

// Where the bytes really come from. allocate returns nullptr when out of memory.
class RawAllocator {
 public:
  virtual ~RawAllocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  virtual const char* name() const = 0;
};

struct AllocatorStats {
  uint64_t raw_allocations = 0;  // calls to the raw allocator that succeeded
  uint64_t raw_releases = 0;
  uint64_t cache_hits = 0;
  size_t bytes_in_use = 0;  // handed out, by rounded size
  size_t bytes_cached = 0;  // held in free lists
  size_t peak_bytes_in_use = 0;
  // Reserved: every block the raw allocator handed out and the cache still holds, live or free
  // (bytes_in_use + bytes_cached): what the process takes from the device.
  size_t peak_bytes_reserved = 0;
};

class CachingAllocator {
 public:
  using StreamTag = uintptr_t;  // a cudaStream_t value, or 0

  explicit CachingAllocator(std::unique_ptr<RawAllocator> raw);
  ~CachingAllocator();  // returns every block, cached or still in use, to the raw allocator
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Zero bytes gives nullptr. Throws Error (with the stats) when memory cannot be found.
  void* allocate(size_t bytes, StreamTag stream = 0);
  // Returns a block to the cache; nullptr is ignored; an unknown pointer is an Error.
  void release(void* ptr);
  // Gives every cached (free) block back to the raw allocator.
  void empty_cache();

  AllocatorStats stats() const;
  // Starts new peaks (in use and reserved) from what is in use and reserved now (a benchmark's
  // per-run peaks).
  void reset_peak();
  static size_t round_size(size_t bytes);

 private:
  struct Block {
    size_t size;
    StreamTag stream;
  };
  // Ordered by stream, then size: the best fit is a lower_bound.
  using FreeKey = std::pair<StreamTag, size_t>;

  // The smallest cached block of `stream` that can serve `size` bytes (removed from the cache), or
  // nullptr; its size into *block_size.
  void* take_cached_locked(size_t size, StreamTag stream, size_t* block_size);
  void release_cached_locked();

  std::unique_ptr<RawAllocator> raw_;
  mutable std::mutex mutex_;
  std::map<FreeKey, std::vector<void*>> free_blocks_;
  std::unordered_map<void*, Block> live_blocks_;
  AllocatorStats stats_;
};

}  // namespace dtrain::runtime
