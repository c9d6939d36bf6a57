#include "runtime/memory/caching_allocator.h"

#include <bit>

#include "runtime/base/error.h"

namespace dtrain::runtime {

CachingAllocator::CachingAllocator(std::unique_ptr<RawAllocator> raw) : raw_(std::move(raw)) {
  DTRAIN_CHECK(raw_ != nullptr) << "caching allocator needs a raw allocator";
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
  for (auto& [ptr, block] : live_blocks_) raw_->release(ptr);
}

size_t CachingAllocator::round_size(size_t bytes) {
  constexpr size_t kSmallStep = 512;
  constexpr size_t kLarge = size_t{1} << 20;
  if (bytes <= kLarge) return (bytes + kSmallStep - 1) / kSmallStep * kSmallStep;
  // 64 steps between powers of two: (1 + i/64) x 2^k.
  const size_t power = std::bit_floor(bytes);
  const size_t step = power / 64;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::take_cached_locked(size_t size, StreamTag stream, size_t* block_size) {
  auto cached = free_blocks_.lower_bound(FreeKey{stream, size});
  if (cached == free_blocks_.end() || cached->first.first != stream || cached->first.second > size + size / 8)
    return nullptr;
  *block_size = cached->first.second;
  void* ptr = cached->second.back();
  cached->second.pop_back();
  if (cached->second.empty()) free_blocks_.erase(cached);
  return ptr;
}

void* CachingAllocator::allocate(size_t bytes, StreamTag stream) {
  if (bytes == 0) return nullptr;
  size_t size = round_size(bytes);
  std::lock_guard lock(mutex_);

  const bool capturing = capturing_here_locked();
  // A capture takes the graph pool's free blocks first (exact sizes), then the stream's cache.
  auto pooled = capturing ? pool_free_.find(size) : pool_free_.end();
  void* ptr = nullptr;
  if (pooled != pool_free_.end() && !pooled->second.empty()) {
    ptr = pooled->second.back();
    pooled->second.pop_back();
  } else {
    ptr = take_cached_locked(size, stream, &size);
  }
  if (ptr != nullptr) {
    stats_.bytes_cached -= size;
    ++stats_.cache_hits;
  } else {
    ptr = raw_->allocate(size);
    // Out of memory: give the cache back and try once more; not under a capture, where cudaFree,
    // which waits for the device, would fail it (the capture fails on the null pointer instead).
    if (ptr == nullptr && !capturing) {
      release_cached_locked();
      ptr = raw_->allocate(size);
    }
    DTRAIN_CHECK(ptr != nullptr) << raw_->name() << " could not allocate " << size << " bytes (" << stats_.bytes_in_use
                                 << " bytes in use, peak " << stats_.peak_bytes_in_use << ")";
    ++stats_.raw_allocations;
    const size_t reserved = stats_.bytes_in_use + stats_.bytes_cached + size;
    if (reserved > stats_.peak_bytes_reserved) stats_.peak_bytes_reserved = reserved;
  }
  live_blocks_.emplace(ptr, Block{size, stream});
  if (capturing) pool_blocks_[ptr] = Block{size, stream};
  stats_.bytes_in_use += size;
  if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
  return ptr;
}

void CachingAllocator::release(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  auto live = live_blocks_.find(ptr);
  DTRAIN_CHECK(live != live_blocks_.end()) << raw_->name() << ": release of a pointer it did not allocate";
  const Block block = live->second;
  live_blocks_.erase(live);
  stats_.bytes_in_use -= block.size;
  stats_.bytes_cached += block.size;
  if (pool_blocks_.count(ptr) != 0) {
    pool_free_[block.size].push_back(ptr);
  } else {
    free_blocks_[FreeKey{block.stream, block.size}].push_back(ptr);
  }
}

bool CachingAllocator::capturing_here_locked() const {
  return capturing_thread_ && *capturing_thread_ == std::this_thread::get_id();
}

void CachingAllocator::begin_graph_pool() {
  std::lock_guard lock(mutex_);
  DTRAIN_CHECK(!capturing_thread_) << raw_->name() << ": a graph capture is already open";
  capturing_thread_ = std::this_thread::get_id();
}

void CachingAllocator::end_graph_pool() {
  std::lock_guard lock(mutex_);
  DTRAIN_CHECK(capturing_thread_) << raw_->name() << ": end of a graph capture that never began";
  capturing_thread_.reset();
}

void CachingAllocator::release_graph_pool() {
  std::lock_guard lock(mutex_);
  capturing_thread_.reset();
  // Free pool blocks join the cache under their stream; live ones return there when released.
  for (auto& [size, pointers] : pool_free_) {
    for (void* ptr : pointers) {
      free_blocks_[FreeKey{pool_blocks_.at(ptr).stream, size}].push_back(ptr);
    }
  }
  pool_free_.clear();
  pool_blocks_.clear();
}

size_t CachingAllocator::graph_pool_bytes() const {
  std::lock_guard lock(mutex_);
  size_t bytes = 0;
  for (const auto& [ptr, block] : pool_blocks_) bytes += block.size;
  return bytes;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (auto& [key, pointers] : free_blocks_) {
    for (void* ptr : pointers) {
      raw_->release(ptr);
      ++stats_.raw_releases;
    }
  }
  free_blocks_.clear();
  size_t pool_free_bytes = 0;  // still cached: the graph pool's
  for (const auto& [size, pointers] : pool_free_) pool_free_bytes += size * pointers.size();
  stats_.bytes_cached = pool_free_bytes;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
  stats_.peak_bytes_reserved = stats_.bytes_in_use + stats_.bytes_cached;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace dtrain::runtime
