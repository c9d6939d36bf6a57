#include "train/data/data_loader.h"

#include <malloc.h>

#include <algorithm>
#include <mutex>

#include "runtime/base/error.h"

namespace dtrain::train {
namespace {

// libjpeg allocates and frees its working memory (up to a few MiB for a large or progressive
// image) for every image. glibc serves blocks above its mmap threshold with mmap and returns them
// with munmap, and in a process with many threads every munmap interrupts all of them to flush
// their TLBs: with 14 decoding threads on an H200 host that cost the loader 5-9% of its rate
// (90.7% -> 95.3% of linear from 1 to 14 threads, bench/results/2026-11-23_h200x2). Freed memory
// is kept in the heap for reuse instead. Once per process, before the first loader thread starts.
void keep_freed_memory_for_reuse() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  });
}

}  // namespace

int Batch::pending_images() const {
  int n = 0;
  for (int p = 0; p < size && p < static_cast<int>(deferred.size()); ++p) n += deferred[static_cast<size_t>(p)].pending;
  return n;
}

int32_t decode_on_host(const Batch& batch, int position, uint8_t* out) {
  const DeferredJpeg& job = batch.deferred.at(static_cast<size_t>(position));
  std::mt19937_64 rng(job.rng_seed);
  return batch.dataset->load(job.index, rng, out);
}

DataLoader::DataLoader(const Dataset& dataset, const ShardedSampler& sampler, LoaderOptions options)
    : dataset_(dataset),
      sampler_(sampler),
      options_(options),
      slots_(static_cast<size_t>(std::max(options.prefetch, 1))) {
  DTRAIN_USAGE_CHECK(options.batch_size > 0 && options.threads > 0 && options.prefetch > 0)
      << "loader batch size, threads and prefetch depth must be positive";
  keep_freed_memory_for_reuse();
  for (Slot& s : slots_) {
    s.batch.pixels =
        runtime::Buffer(runtime::MemoryKind::kPinnedHost, dataset.output_shape().bytes() * options.batch_size);
    s.batch.labels.resize(static_cast<size_t>(options.batch_size));
    s.batch.dataset = &dataset;
    if (options.defer_decoding && dataset.can_defer_decoding()) {
      s.batch.deferred.resize(static_cast<size_t>(options.batch_size));
      s.batch.arena = std::make_unique<JpegArena>(kArenaBytesPerImage * static_cast<size_t>(options.batch_size));
    }
  }
}

DataLoader::~DataLoader() {
  stop_workers();
}

void DataLoader::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  stopping_ = false;
}

int DataLoader::batch_size_of(long number) const {
  const size_t first = static_cast<size_t>(number) * static_cast<size_t>(options_.batch_size);
  if (number < 0 || static_cast<size_t>(number) >= batches_per_epoch()) return 0;
  return static_cast<int>(std::min<size_t>(options_.batch_size, indices_.size() - first));
}

void DataLoader::assign(Slot& slot, long number) {
  slot.batch.size = batch_size_of(number);
  if (slot.batch.arena) slot.batch.arena->clear();
  slot.remaining.store(slot.batch.size, std::memory_order_relaxed);
  slot.ready = false;
  slot.state = SlotState::kFilling;
  slot.assigned.store(number, std::memory_order_release);  // publishes size and remaining to the workers
}

void DataLoader::start_epoch(int epoch, size_t first_batch, size_t first_entry) {
  stop_workers();
  for (const Slot& s : slots_) {
    DTRAIN_CHECK(s.state != SlotState::kRetained) << "start_epoch with a batch still retained: release it first";
  }
  indices_ = sampler_.indices(epoch);
  if (first_entry > 0) {
    const size_t from = std::min(indices_.size(), first_batch * static_cast<size_t>(options_.batch_size));
    const std::vector<size_t> rest = sampler_.indices_from(epoch, first_entry, indices_.size() - from);
    std::copy(rest.begin(), rest.end(), indices_.begin() + static_cast<std::ptrdiff_t>(from));
  }
  epoch_ = epoch;
  next_to_return_ = first_batch;
  next_job_ = first_batch * static_cast<size_t>(options_.batch_size);
  failure_ = nullptr;
  // Batch n always fills slot n % prefetch.
  const size_t p = slots_.size();
  for (size_t s = 0; s < p; ++s) assign(slots_[s], static_cast<long>(first_batch + (s + p - first_batch % p) % p));
  for (int t = 0; t < options_.threads; ++t) workers_.emplace_back([this] { work(); });
}

void DataLoader::work() {
  const size_t total = batches_per_epoch();
  const size_t per_batch = static_cast<size_t>(options_.batch_size);
  const size_t bytes = dataset_.output_shape().bytes();
  while (!stopping_.load(std::memory_order_relaxed)) {
    const size_t job = next_job_.fetch_add(1, std::memory_order_relaxed);
    const size_t number = job / per_batch;
    const int position = static_cast<int>(job % per_batch);
    if (number >= total) return;
    Slot& slot = slots_[number % slots_.size()];
    if (slot.assigned.load(std::memory_order_acquire) != static_cast<long>(number)) {
      // The slot still holds an earlier batch the consumer has not handed back.
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || slot.assigned.load() == static_cast<long>(number); });
      if (stopping_) return;
    }
    if (position >= slot.batch.size) continue;  // beyond a partial last batch
    try {
      const size_t index = indices_[job];
      const uint64_t seed = sample_seed(options_.seed, epoch_, index);
      std::mt19937_64 rng(seed);
      auto* pixels = static_cast<uint8_t*>(slot.batch.pixels.data()) + static_cast<size_t>(position) * bytes;
      int32_t& label = slot.batch.labels[static_cast<size_t>(position)];
      if (slot.batch.arena) {
        DeferredJpeg& record = slot.batch.deferred[static_cast<size_t>(position)];
        record.index = index;
        record.rng_seed = seed;
        label = dataset_.load_deferred(index, rng, pixels, JpegDeferral{slot.batch.arena.get(), &record});
      } else {
        label = dataset_.load(index, rng, pixels);
      }
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        if (!failure_) failure_ = std::current_exception();
      }
      changed_.notify_all();
      return;
    }
    if (slot.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      {
        std::lock_guard lock(mutex_);
        slot.ready = true;
      }
      changed_.notify_all();
    }
  }
}

const Batch* DataLoader::next() {
  std::unique_lock lock(mutex_);
  bool released = false;
  for (Slot& s : slots_) {
    if (s.state != SlotState::kHandedOut) continue;
    assign(s, s.assigned.load() + static_cast<long>(slots_.size()));
    released = true;
  }
  if (released) changed_.notify_all();
  if (next_to_return_ >= batches_per_epoch()) return nullptr;
  Slot& slot = slots_[next_to_return_ % slots_.size()];
  DTRAIN_CHECK(slot.state == SlotState::kFilling && slot.assigned.load() == static_cast<long>(next_to_return_))
      << "the consumer retains all " << slots_.size() << " batches the loader has (prefetch too small)";
  changed_.wait(lock, [&] { return failure_ || slot.ready; });
  if (failure_) std::rethrow_exception(failure_);
  slot.state = SlotState::kHandedOut;
  ++next_to_return_;
  return &slot.batch;
}

DataLoader::Slot& DataLoader::slot_of(const Batch* batch) {
  for (Slot& s : slots_) {
    if (&s.batch == batch) return s;
  }
  DTRAIN_FAIL() << "this batch does not belong to the loader";
}

void DataLoader::retain(const Batch* batch) {
  std::lock_guard lock(mutex_);
  Slot& s = slot_of(batch);
  DTRAIN_CHECK(s.state == SlotState::kHandedOut) << "retain: the batch is not the one next() handed out";
  s.state = SlotState::kRetained;
}

void DataLoader::release(const Batch* batch) {
  {
    std::lock_guard lock(mutex_);
    Slot& s = slot_of(batch);
    DTRAIN_CHECK(s.state == SlotState::kRetained) << "release: the batch is not retained";
    assign(s, s.assigned.load() + static_cast<long>(slots_.size()));
  }
  changed_.notify_all();
}

void normalize_batch(const uint8_t* nhwc, int batch, ImageShape s, const float mean[3], const float std[3],
                     PixelLayout layout, float* out) {
  const size_t plane = static_cast<size_t>(s.height) * s.width;
  const int channels = s.channels;
  for (int n = 0; n < batch; ++n) {
    const uint8_t* in = nhwc + static_cast<size_t>(n) * s.bytes();
    float* o = out + static_cast<size_t>(n) * s.bytes();
    for (int c = 0; c < channels; ++c) {
      const float scale = 1.0f / (255.0f * std[c]);
      const float shift = -mean[c] / std[c];
      if (layout == PixelLayout::kNchw) {
        for (size_t p = 0; p < plane; ++p) o[c * plane + p] = in[p * channels + c] * scale + shift;
      } else {
        for (size_t p = 0; p < plane; ++p) o[p * channels + c] = in[p * channels + c] * scale + shift;
      }
    }
  }
}

}  // namespace dtrain::train
