#pragma once
// A multi-threaded prefetching loader: `threads` workers fill batches up to `prefetch` ahead of the
// consumer, each batch a uint8 NHWC block in pinned host memory (pinned when CUDA is present, so
// the GPU path can copy it asynchronously) plus labels. Batches come out in sampler order; a sample's
// augmentation depends only on (seed, epoch, index), never on which thread made it.
// Incomplete final batches are dropped (unless keep_partial_batch), so every rank runs the same
// number of steps.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/core/buffer.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/data/sharded_sampler.h"

namespace dtrain::train {

struct LoaderOptions {
  int batch_size = 32;
  int threads = 2;
  int prefetch = 4;
  uint64_t seed = 0;
  bool keep_partial_batch = false;  // evaluation: the last, smaller batch too
};

struct Batch {
  core::Buffer pixels;  // batch_size x H x W x C
  std::vector<int32_t> labels;
  int size = 0;
};

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
  // Starts producing the batches of `epoch` from batch `first_batch` (resuming mid-epoch), finishing
  // or abandoning the previous epoch.
  void start_epoch(int epoch, size_t first_batch = 0);
  // The next batch of the epoch, valid until the following call; nullptr after the last one.
  // Rethrows a worker's failure (a corrupt file, say).
  const Batch* next();

 private:
  void work();
  void stop_workers();

  const Dataset& dataset_;
  const ShardedSampler& sampler_;
  LoaderOptions options_;
  std::vector<Batch> slots_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<size_t> indices_;
  int epoch_ = 0;
  size_t next_to_fill_ = 0;     // batch number the next free worker takes
  size_t next_to_return_ = 0;   // batch number next() hands out
  std::vector<long> ready_;     // per slot: the batch number it holds complete, or -1
  bool consumer_holds_ = false; // the last batch handed out is still in use
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::vector<std::thread> workers_;
};

enum class PixelLayout { kNchw, kNhwc };

// uint8 NHWC -> fp32 in `layout`, (x / 255 - mean[c]) / std[c]. The CPU layers take NCHW; the GPU
// fast path takes NHWC (and normalizes on the device instead, from the same uint8 batch).
void normalize_batch(const uint8_t* nhwc, int batch, ImageShape shape, const float mean[3], const float std[3],
                     PixelLayout layout, float* out);

}  // namespace dtrain::train
