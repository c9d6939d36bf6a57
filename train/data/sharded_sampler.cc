#include "train/data/sharded_sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "runtime/base/error.h"

namespace dtrain::train {

ShardedSampler::ShardedSampler(size_t dataset_size, int world_size, int rank, SamplerOptions options)
    : size_(dataset_size), world_(world_size), rank_(rank), options_(options) {
  DTRAIN_CHECK(world_size > 0 && rank >= 0 && rank < world_size) << "rank " << rank << " of " << world_size;
  const size_t world = static_cast<size_t>(world_size);
  if (options.drop_last) {
    per_rank_ = size_ / world;
  } else if (options.pad) {
    per_rank_ = (size_ + world - 1) / world;
  } else {
    per_rank_ = size_ / world + (static_cast<size_t>(rank) < size_ % world ? 1 : 0);
  }
  DTRAIN_USAGE_CHECK(per_rank_ > 0 || size_ == 0 || !options.drop_last)
      << "dataset of " << size_ << " samples is smaller than the " << world_size << " ranks with drop_last";
}

std::vector<size_t> ShardedSampler::shuffled(int epoch) const {
  std::vector<size_t> order(size_);
  std::iota(order.begin(), order.end(), size_t{0});
  if (options_.shuffle) {
    // std::shuffle's algorithm is unspecified across standard libraries: use our own Fisher-Yates
    // over mt19937_64, whose sequence is fixed by the standard, so every rank agrees.
    std::mt19937_64 rng(options_.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch));
    for (size_t i = size_; i > 1; --i) {
      const size_t j = static_cast<size_t>(rng() % i);
      std::swap(order[i - 1], order[j]);
    }
  }
  return order;
}

std::vector<size_t> ShardedSampler::indices(int epoch) const {
  return indices_from(epoch, 0, per_rank_);
}

std::vector<size_t> ShardedSampler::indices_from(int epoch, size_t first_entry, size_t count) const {
  const std::vector<size_t> order = shuffled(epoch);
  std::vector<size_t> mine;
  if (size_ == 0) return mine;
  mine.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    const size_t position = first_entry + k * static_cast<size_t>(world_) + static_cast<size_t>(rank_);
    mine.push_back(order[position % size_]);  // wraps only when padding, or past a resumed epoch's end
  }
  return mine;
}

}  // namespace dtrain::train
