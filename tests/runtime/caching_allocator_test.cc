#include "runtime/memory/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "runtime/base/error.h"
#include "tests/support/test_seed.h"

namespace dtrain::runtime {
namespace {

// A raw allocator that counts calls and can be told to run out of memory.
class CountingAllocator final : public RawAllocator {
 public:
  struct Counters {
    int allocations = 0;
    int releases = 0;
    size_t live_bytes = 0;
    size_t capacity = SIZE_MAX;
  };
  explicit CountingAllocator(Counters* counters) : counters_(counters) {}
  void* allocate(size_t bytes) override {
    if (counters_->live_bytes + bytes > counters_->capacity) return nullptr;
    ++counters_->allocations;
    counters_->live_bytes += bytes;
    void* ptr = std::malloc(bytes);
    sizes_[ptr] = bytes;
    return ptr;
  }
  void release(void* ptr) override {
    ++counters_->releases;
    counters_->live_bytes -= sizes_.at(ptr);
    sizes_.erase(ptr);
    std::free(ptr);
  }
  const char* name() const override { return "counting"; }

 private:
  Counters* counters_;
  std::map<void*, size_t> sizes_;
};

TEST(CachingAllocator, SizeClassesWasteAtMostA64th) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  std::mt19937_64 rng(dtrain::test::random_seed());
  for (int i = 0; i < 10000; ++i) {
    const size_t bytes = 1 + rng() % (size_t{1} << 34);
    const size_t rounded = CachingAllocator::round_size(bytes);
    ASSERT_GE(rounded, bytes);
    if (bytes > (size_t{1} << 20)) {
      ASSERT_LE(rounded, bytes + bytes / 64) << bytes;
    }
    ASSERT_EQ(CachingAllocator::round_size(rounded), rounded) << "classes must be fixed points";
  }
}

// A request takes the smallest cached block of its stream that fits and is at most an eighth
// larger; the block's whole size counts as in use.
TEST(CachingAllocator, BestFitReuseWithinAnEighth) {
  CountingAllocator::Counters counters;
  CachingAllocator allocator(std::make_unique<CountingAllocator>(&counters));
  const size_t mib = size_t{1} << 20;
  void* b100 = allocator.allocate(100 * mib);
  void* b108 = allocator.allocate(108 * mib);
  void* b140 = allocator.allocate(140 * mib);
  allocator.release(b140);
  allocator.release(b108);
  allocator.release(b100);
  EXPECT_EQ(allocator.allocate(97 * mib), b100) << "the smallest that fits";
  EXPECT_EQ(allocator.allocate(100 * mib), b108) << "8% larger: reused";
  EXPECT_EQ(allocator.stats().bytes_in_use,
            CachingAllocator::round_size(100 * mib) + CachingAllocator::round_size(108 * mib));
  void* fresh = allocator.allocate(120 * mib);  // 140 MiB is over an eighth larger
  EXPECT_NE(fresh, b140);
  EXPECT_EQ(counters.allocations, 4);
  EXPECT_NE(allocator.allocate(130 * mib, 0xA), b140) << "another stream's block";
  EXPECT_EQ(allocator.allocate(130 * mib), b140);
  EXPECT_EQ(counters.allocations, 5);
}

TEST(CachingAllocator, SteadyStateMakesNoRawAllocations) {
  CountingAllocator::Counters counters;
  CachingAllocator allocator(std::make_unique<CountingAllocator>(&counters));
  const std::vector<size_t> step_sizes = {100, 4096, 1 << 20, 3 << 20, 25 << 20, 777, 4096};
  for (int step = 0; step < 20; ++step) {
    std::vector<void*> blocks;
    for (size_t bytes : step_sizes) blocks.push_back(allocator.allocate(bytes));
    for (void* ptr : blocks) allocator.release(ptr);
    if (step == 0) {
      EXPECT_EQ(counters.allocations, static_cast<int>(step_sizes.size()));
    }
  }
  EXPECT_EQ(counters.allocations, static_cast<int>(step_sizes.size()));
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.raw_allocations, step_sizes.size());
  EXPECT_EQ(stats.cache_hits, 19 * step_sizes.size());
  EXPECT_EQ(stats.bytes_in_use, 0u);
  EXPECT_GT(stats.peak_bytes_in_use, size_t{29} << 20);
}

// A training step repeats one pattern of allocations and releases of a few sizes (activations,
// gradients, workspaces), some within an eighth of each other: after a few steps best-fit reuse
// has the blocks it needs and the raw allocator is not called again.
TEST(CachingAllocator, RepeatedStepsSettle) {
  std::mt19937 rng(dtrain::test::random_seed());
  std::vector<size_t> sizes;
  for (int i = 0; i < 12; ++i) sizes.push_back((size_t{1} << 20) + rng() % (size_t{6} << 20));
  struct Op {
    bool allocate;
    size_t size_or_slot;
  };
  std::vector<Op> step;  // allocations into slots, released in a random order, with some interleaving
  std::vector<size_t> open;
  for (size_t slot = 0; slot < 40; ++slot) {
    step.push_back({true, sizes[rng() % sizes.size()]});
    open.push_back(slot);
    while (!open.empty() && rng() % 3 == 0) {
      const size_t k = rng() % open.size();
      step.push_back({false, open[k]});
      open.erase(open.begin() + static_cast<long>(k));
    }
  }
  for (size_t slot : open) step.push_back({false, slot});
  CountingAllocator::Counters counters;
  CachingAllocator allocator(std::make_unique<CountingAllocator>(&counters));
  std::vector<int> raw_after;
  for (int s = 0; s < 10; ++s) {
    std::vector<void*> slots;
    for (const Op& op : step) {
      if (op.allocate) {
        slots.push_back(allocator.allocate(op.size_or_slot));
      } else {
        allocator.release(slots[op.size_or_slot]);
      }
    }
    raw_after.push_back(counters.allocations);
  }
  EXPECT_EQ(raw_after[4], raw_after[9]) << "raw allocations still growing after 5 steps";
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.bytes_in_use, 0u);
  EXPECT_EQ(stats.bytes_cached, counters.live_bytes);
}

TEST(CachingAllocator, LiveBlocksNeverAlias) {
  CountingAllocator::Counters counters;
  CachingAllocator allocator(std::make_unique<CountingAllocator>(&counters));
  std::mt19937 rng(dtrain::test::random_seed());
  std::vector<void*> live;
  for (int i = 0; i < 2000; ++i) {
    if (!live.empty() && rng() % 2) {
      const size_t victim = rng() % live.size();
      allocator.release(live[victim]);
      live.erase(live.begin() + static_cast<long>(victim));
    } else {
      live.push_back(allocator.allocate(1 + rng() % 5000));
    }
    ASSERT_EQ(std::set<void*>(live.begin(), live.end()).size(), live.size());
  }
  for (void* ptr : live) allocator.release(ptr);
}

TEST(CachingAllocator, BlocksAreNotReusedAcrossStreams) {
  CountingAllocator::Counters counters;
  CachingAllocator allocator(std::make_unique<CountingAllocator>(&counters));
  void* on_stream_a = allocator.allocate(1000, 0xA);
  allocator.release(on_stream_a);
  void* on_stream_b = allocator.allocate(1000, 0xB);
  EXPECT_NE(on_stream_a, on_stream_b);
  EXPECT_EQ(allocator.allocate(1000, 0xA), on_stream_a);
  allocator.release(on_stream_b);
}

TEST(CachingAllocator, OutOfMemoryFreesTheCacheAndRetries) {
  CountingAllocator::Counters counters;
  counters.capacity = 3 << 20;
  CachingAllocator allocator(std::make_unique<CountingAllocator>(&counters));
  allocator.release(allocator.allocate(2 << 20));                // cached, still counted as live by the raw allocator
  void* big = allocator.allocate(static_cast<size_t>(5) << 19);  // 2.5 MiB fits only after the cache is returned
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(counters.releases, 1);
  try {
    allocator.allocate(4 << 20);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("could not allocate"), std::string::npos) << e.what();
  }
  allocator.release(big);
}

// Under a capture, returning the cache would call cudaFree, which waits for the device and fails
// the capture: out of memory there is an error at once, and the cache stays as it was.
TEST(CachingAllocator, OutOfMemoryUnderACaptureKeepsTheCache) {
  CountingAllocator::Counters counters;
  counters.capacity = 3 << 20;
  CachingAllocator allocator(std::make_unique<CountingAllocator>(&counters));
  allocator.release(allocator.allocate(2 << 20));
  allocator.begin_graph_pool();
  try {
    allocator.allocate(static_cast<size_t>(5) << 19);  // would fit once the cache were returned
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("could not allocate"), std::string::npos) << e.what();
  }
  allocator.end_graph_pool();
  EXPECT_EQ(counters.releases, 0) << "the cache was returned during a capture";
  void* big = allocator.allocate(static_cast<size_t>(5) << 19);  // outside the capture: returned, then fits
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(counters.releases, 1);
  allocator.release(big);
}

// Reserved is what the raw allocator handed out and the cache holds: the raw allocator's own count
// of live bytes is the reference.
TEST(CachingAllocator, PeakReservedCountsCachedBlocks) {
  CountingAllocator::Counters counters;
  CachingAllocator allocator(std::make_unique<CountingAllocator>(&counters));
  const size_t a = CachingAllocator::round_size(3 << 20), b = CachingAllocator::round_size(5 << 20),
               c = CachingAllocator::round_size(9 << 20);
  void* pa = allocator.allocate(3 << 20);
  void* pb = allocator.allocate(5 << 20);
  allocator.release(pa);                   // cached: still reserved
  void* pc = allocator.allocate(9 << 20);  // too large for the cached block: a new raw allocation
  AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.peak_bytes_in_use, b + c);
  EXPECT_EQ(stats.peak_bytes_reserved, a + b + c);
  EXPECT_EQ(stats.peak_bytes_reserved, counters.live_bytes);
  EXPECT_EQ(stats.bytes_in_use + stats.bytes_cached, counters.live_bytes);
  allocator.release(pb);
  allocator.release(pc);
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().peak_bytes_reserved, a + b + c) << "a peak outlives the blocks";
  allocator.reset_peak();
  stats = allocator.stats();
  EXPECT_EQ(stats.peak_bytes_in_use, 0u);
  EXPECT_EQ(stats.peak_bytes_reserved, 0u);
  void* pd = allocator.allocate(1000);
  allocator.release(pd);
  EXPECT_EQ(allocator.stats().peak_bytes_reserved, CachingAllocator::round_size(1000));
}

TEST(CachingAllocator, EmptyCacheAndForeignPointers) {
  CountingAllocator::Counters counters;
  CachingAllocator allocator(std::make_unique<CountingAllocator>(&counters));
  allocator.release(allocator.allocate(10));
  allocator.empty_cache();
  EXPECT_EQ(counters.live_bytes, 0u);
  EXPECT_EQ(allocator.allocate(0), nullptr);
  allocator.release(nullptr);
  int not_ours = 0;
  EXPECT_THROW(allocator.release(&not_ours), Error);
}

// A graph pool keeps a capture's blocks: released, they go neither to eager allocations nor back
// to the raw allocator (empty_cache, the out-of-memory retry); a later capture gets them again;
// released with the pool, they are cached blocks like any other.
TEST(CachingAllocator, GraphPoolHoldsTheCapturesBlocks) {
  CountingAllocator::Counters counters;
  CachingAllocator cache(std::make_unique<CountingAllocator>(&counters));
  const CachingAllocator::StreamTag stream = 7;
  cache.begin_graph_pool();
  void* captured = cache.allocate(4096, stream);
  cache.end_graph_pool();
  EXPECT_EQ(cache.graph_pool_bytes(), 4096u);
  cache.release(captured);
  void* eager = cache.allocate(4096, stream);  // same class and stream, yet a new block
  EXPECT_NE(eager, captured);
  cache.release(eager);
  cache.empty_cache();
  EXPECT_EQ(counters.releases, 1) << "only the eager block goes back";
  EXPECT_EQ(cache.stats().bytes_cached, 4096u) << "the pool's free block counts as cached";
  cache.begin_graph_pool();
  EXPECT_EQ(cache.allocate(4096, stream), captured) << "a later capture reuses the pool";
  cache.end_graph_pool();
  cache.release(captured);
  EXPECT_THROW(cache.end_graph_pool(), Error);
  cache.release_graph_pool();
  EXPECT_EQ(cache.graph_pool_bytes(), 0u);
  EXPECT_EQ(cache.allocate(4096, stream), captured) << "back in the cache once the pool goes";
}

// Another thread allocating while a capture is open is not part of the pool.
TEST(CachingAllocator, GraphPoolTakesOnlyTheCapturingThread) {
  CountingAllocator::Counters counters;
  CachingAllocator cache(std::make_unique<CountingAllocator>(&counters));
  cache.begin_graph_pool();
  EXPECT_THROW(cache.begin_graph_pool(), Error);
  void* other = nullptr;
  std::thread([&] { other = cache.allocate(1024); }).join();
  cache.end_graph_pool();
  EXPECT_EQ(cache.graph_pool_bytes(), 0u);
  cache.release(other);
  EXPECT_EQ(cache.allocate(1024), other);
}

}  // namespace
}  // namespace dtrain::runtime
