#pragma once
// Which samples each rank takes in an epoch: a permutation of the whole dataset shuffled from a
// seed every rank shares (so the ranks agree without talking), of which rank r takes every world-th
// element starting at r. Every rank gets the same count, so no rank waits at the end of an epoch:
// the tail is dropped (drop_last) or padded by wrapping around to the start.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain::train {

struct SamplerOptions {
  uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = true;  // false: pad by repeating samples from the start of the permutation
  // With drop_last false and pad false, each sample is taken exactly once and ranks may get one
  // sample more than others: for evaluation, where nothing waits per step.
  bool pad = true;
};

class ShardedSampler {
 public:
  ShardedSampler(size_t dataset_size, int world_size, int rank, SamplerOptions options);

  size_t per_rank() const { return per_rank_; }
  // This rank's sample indices for `epoch`, in order.
  std::vector<size_t> indices(int epoch) const;
  // The epoch's shuffled list from entry `first_entry` on, dealt over the ranks again: this rank's
  // `count` entries first_entry + k x world + rank (wrapping past the end). The first k steps of
  // indices() cover exactly the entries before k x batch x world, so a run resumed on another
  // world size or batch takes the rest of its epoch from here, and every entry is seen once.
  std::vector<size_t> indices_from(int epoch, size_t first_entry, size_t count) const;

 private:
  size_t size_;
  int world_;
  int rank_;
  SamplerOptions options_;
  // The whole dataset in the epoch's order.
  std::vector<size_t> shuffled(int epoch) const;

  size_t per_rank_;
};

}  // namespace dtrain::train
