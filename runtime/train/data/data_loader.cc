#include "runtime/train/data/data_loader.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace dtrain::train {

DataLoader::DataLoader(const Dataset& dataset, const ShardedSampler& sampler, LoaderOptions options)
    : dataset_(dataset), sampler_(sampler), options_(options) {
  DTRAIN_USAGE_CHECK(options.batch_size > 0 && options.threads > 0 && options.prefetch > 0)
      << "loader batch size, threads and prefetch depth must be positive";
  slots_.resize(static_cast<size_t>(options.prefetch));
  for (Batch& b : slots_) {
    b.pixels = core::Buffer(core::MemoryKind::kPinnedHost, dataset.output_shape().bytes() * options.batch_size);
    b.labels.resize(static_cast<size_t>(options.batch_size));
    b.size = options.batch_size;
  }
  ready_.assign(slots_.size(), -1);
}

DataLoader::~DataLoader() { stop_workers(); }

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

void DataLoader::start_epoch(int epoch, size_t first_batch) {
  stop_workers();
  indices_ = sampler_.indices(epoch);
  epoch_ = epoch;
  next_to_fill_ = first_batch;
  next_to_return_ = first_batch;
  consumer_holds_ = false;
  ready_.assign(slots_.size(), -1);
  failure_ = nullptr;
  for (int t = 0; t < options_.threads; ++t) workers_.emplace_back([this] { work(); });
}

void DataLoader::work() {
  const size_t total = batches_per_epoch();
  const size_t bytes = dataset_.output_shape().bytes();
  for (;;) {
    size_t number = 0;
    {
      std::unique_lock lock(mutex_);
      // A slot is free once its previous batch was handed out and the consumer let go of it.
      changed_.wait(lock, [&] {
        const size_t released = next_to_return_ - (consumer_holds_ ? 1 : 0);
        return stopping_ || next_to_fill_ >= total || next_to_fill_ < released + slots_.size();
      });
      if (stopping_ || next_to_fill_ >= total) return;
      number = next_to_fill_++;
    }
    Batch& batch = slots_[number % slots_.size()];
    try {
      auto* pixels = static_cast<uint8_t*>(batch.pixels.data());
      const size_t first = number * static_cast<size_t>(options_.batch_size);
      batch.size = static_cast<int>(std::min<size_t>(options_.batch_size, indices_.size() - first));
      for (int i = 0; i < batch.size; ++i) {
        const size_t index = indices_[number * static_cast<size_t>(options_.batch_size) + static_cast<size_t>(i)];
        std::mt19937_64 rng(options_.seed ^ (uint64_t(epoch_) << 40) ^ (index * 0x9E3779B97F4A7C15ull));
        batch.labels[static_cast<size_t>(i)] = dataset_.load(index, rng, pixels + static_cast<size_t>(i) * bytes);
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      ready_[number % slots_.size()] = static_cast<long>(number);
    }
    changed_.notify_all();
  }
}

const Batch* DataLoader::next() {
  std::unique_lock lock(mutex_);
  consumer_holds_ = false;  // the caller is done with the batch it got last time
  changed_.notify_all();
  if (next_to_return_ >= batches_per_epoch()) return nullptr;
  const size_t slot = next_to_return_ % slots_.size();
  changed_.wait(lock, [&] { return failure_ || ready_[slot] == static_cast<long>(next_to_return_); });
  if (failure_) std::rethrow_exception(failure_);
  ready_[slot] = -1;
  ++next_to_return_;
  consumer_holds_ = true;
  return &slots_[slot];
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
