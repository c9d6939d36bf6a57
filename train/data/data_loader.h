#pragma once
// A multi-threaded prefetching loader. `prefetch` batches are in flight, each a uint8 NHWC block in
// pinned host memory (pinned when CUDA is present, so the GPU path copies it asynchronously, and
// these slots are the staging ring between the workers and the copy stream) plus labels.
//
// The workers share *images*, not batches: the images of the batches in flight form one queue of
// jobs that every thread draws from (an atomic counter, no lock per image), so all threads are busy
// even when only one batch is free to fill. A batch is ready when its last image is written.
// Batches come out in sampler order; a sample's augmentation depends only on (seed, epoch, index),
// never on which thread made it, so any thread count gives the same batches.
// Incomplete final batches are dropped (unless keep_partial_batch), so every rank runs the same
// number of steps.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "runtime/memory/buffer.h"
#include "train/data/dataset.h"
#include "train/data/sharded_sampler.h"

namespace dtrain::train {

struct LoaderOptions {
  int batch_size = 32;
  int threads = 2;
  int prefetch = 4;  // batches in flight: filling, ready, or held by the consumer
  uint64_t seed = 0;
  bool keep_partial_batch = false;  // evaluation: the last, smaller batch too
  // Leave the images the GPU can decode to it (deferred_jpeg.h), when the dataset can.
  bool defer_decoding = false;
};

struct Batch {
  runtime::Buffer pixels;  // batch_size x H x W x C
  std::vector<int32_t> labels;
  int size = 0;
  // With defer_decoding: one record per position; the pending ones' pixels are not written, and
  // their files are in `arena`. Empty otherwise.
  std::vector<DeferredJpeg> deferred;
  std::unique_ptr<JpegArena> arena;
  const Dataset* dataset = nullptr;  // what the batch was loaded from
  int pending_images() const;
};

// A deferred image decoded on the host after all (the device could not take it): the same crop,
// flip, bad-file accounting and substitute as the loader's own decode. Writes `out`; returns the
// label (a bad file's substitute may have another).
int32_t decode_on_host(const Batch& batch, int position, uint8_t* out);

class DataLoader {
 public:
  DataLoader(const Dataset& dataset, const ShardedSampler& sampler, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  size_t batches_per_epoch() const {
    const size_t b = static_cast<size_t>(options_.batch_size);
    return options_.keep_partial_batch ? (sampler_.per_rank() + b - 1) / b : sampler_.per_rank() / b;
  }
  const LoaderOptions& options() const { return options_; }

  // Starts producing the batches of `epoch` from batch `first_batch` (resuming mid-epoch), finishing
  // or abandoning the previous epoch. No batch may be retained. first_entry > 0 (a resume on another
  // world size or batch): batches first_batch... take the epoch's shuffled list from that entry on,
  // dealt over the ranks again (ShardedSampler::indices_from).
  void start_epoch(int epoch, size_t first_batch = 0, size_t first_entry = 0);
  // The next batch of the epoch; nullptr after the last one. Blocks until it is complete and
  // rethrows a worker's failure (too many bad files, say). Each call hands back to the workers the
  // batches returned before it, except those retained.
  const Batch* next();
  // Keeps the batch `next()` returned out of the workers' hands until release(): for a consumer
  // that still reads it (an asynchronous copy to the GPU) after asking for the next batch. At most
  // prefetch - 1 batches can be retained, or next() would wait forever: it throws instead.
  void retain(const Batch* batch);
  void release(const Batch* batch);

 private:
  enum class SlotState { kFilling, kHandedOut, kRetained };
  struct Slot {
    Batch batch;
    std::atomic<long> assigned{-1};  // the batch number this slot is (to be) filled with
    std::atomic<int> remaining{0};   // images of it not yet written
    bool ready = false;              // under mutex_
    SlotState state = SlotState::kFilling;
  };

  void work();
  void stop_workers();
  // Gives `slot` the batch `number` to fill. Caller holds mutex_.
  void assign(Slot& slot, long number);
  int batch_size_of(long number) const;
  Slot& slot_of(const Batch* batch);

  const Dataset& dataset_;
  const ShardedSampler& sampler_;
  LoaderOptions options_;
  std::vector<Slot> slots_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<size_t> indices_;
  int epoch_ = 0;
  std::atomic<size_t> next_job_{0};  // image job number: batch x batch_size + position
  size_t next_to_return_ = 0;        // batch number next() hands out
  std::atomic<bool> stopping_{false};
  std::exception_ptr failure_;
  std::vector<std::thread> workers_;
};

// The random stream of sample `index`'s augmentation in `epoch`: a function of these alone, so a
// sample looks the same whichever thread (and rank) makes it.
inline uint64_t sample_seed(uint64_t seed, int epoch, size_t index) {
  return seed ^ (uint64_t(epoch) << 40) ^ (index * 0x9E3779B97F4A7C15ull);
}
inline std::mt19937_64 sample_rng(uint64_t seed, int epoch, size_t index) {
  return std::mt19937_64(sample_seed(seed, epoch, index));
}

enum class PixelLayout { kNchw, kNhwc };

// uint8 NHWC -> fp32 in `layout`, (x / 255 - mean[c]) / std[c]. The CPU layers take NCHW; the GPU
// fast path takes NHWC (and normalizes on the device instead, from the same uint8 batch).
void normalize_batch(const uint8_t* nhwc, int batch, ImageShape shape, const float mean[3], const float std[3],
                     PixelLayout layout, float* out);

}  // namespace dtrain::train
