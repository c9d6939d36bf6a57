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
//
// A graph pool keeps the blocks a CUDA graph was captured with for as long as the graph lives: a
// replay writes the addresses baked into the graph, so none of them may go to another owner or back
// to cudaFree meanwhile. Between begin_graph_pool() and end_graph_pool(), what the calling thread
// allocates belongs to the pool; a pool block, once released, is handed out again only to a later
// capture of the same pool (graphs replayed in order on one stream may share addresses), and
// empty_cache() and the out-of-memory retry leave it alone. release_graph_pool() (the graphs are
// gone) gives the pool's free blocks back to the cache. Other threads allocate as usual meanwhile.
// Thread-safe.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
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

  // The graph pool (above). begin while a capture is open is an Error, as is end without begin.
  void begin_graph_pool();
  void end_graph_pool();
  void release_graph_pool();
  // Bytes held by the graph pool, in use or free.
  size_t graph_pool_bytes() const;

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
  bool capturing_here_locked() const;

  std::unique_ptr<RawAllocator> raw_;
  mutable std::mutex mutex_;
  std::map<FreeKey, std::vector<void*>> free_blocks_;
  std::unordered_map<void*, Block> live_blocks_;
  AllocatorStats stats_;
  std::optional<std::thread::id> capturing_thread_;  // set between begin_ and end_graph_pool
  std::unordered_map<void*, Block> pool_blocks_;     // every block of the pool
  std::map<size_t, std::vector<void*>> pool_free_;   // the pool's released blocks, by size
};

}  // namespace dtrain::runtime
