#pragma once
// Synchronized batch norm (ChainerMN's MultiNodeBatchNormalization, MLPerf's BN groups, PyTorch's
// SyncBatchNorm): the ranks of a group normalize with the statistics of all their batches, as one
// rank holding the group's whole batch would. That matters when the per-rank batch is small.
//
// models/ knows nothing of communicators: a BN layer given a BatchStatsReducer exchanges its
// per-channel statistics through it, and the runtime (train/engine/batch_norm_group.h) implements
// it over the ranks of the group. Without one, or with a group of one, a layer uses its own batch
// and calls nothing.
//
// What is exchanged, per BN layer and step (C channels):
//   forward:  the rank's count and per-channel mean and centred sum of squares (M2), merged with
//             Chan's formula in double, so the variance has no cancellation (the E[x^2] - E[x]^2
//             of summed squares would lose it when |mean| >> std);
//   backward: the per-channel sums of dy and dy * xhat, added in double.
// Both merge the ranks' contributions in group-rank order, so every rank of the group gets
// bit-identical statistics and its replica of the running statistics stays identical.
#include <cstddef>
#include <cstdint>

namespace dtrain::models {

// Contract: all_gather is a blocking collective over the group. Every rank of the group calls it
// in the same order with the same count (the BN layers' forward order, then backward order, the
// same on every replica). It is called on the thread running forward and backward. Failures throw.
class BatchStatsReducer {
 public:
  virtual ~BatchStatsReducer() = default;
  virtual int group_size() const = 0;
  // all[r * count + i] = mine[i] of group rank r, for every rank r of the group (this one included).
  virtual void all_gather(const double* mine, size_t count, double* all) = 0;
};

// True when `reducer` synchronizes anything (a group of one changes nothing and exchanges nothing).
inline bool synchronizes(const BatchStatsReducer* reducer) {
  return reducer != nullptr && reducer->group_size() > 1;
}

// Replaces this rank's moments (count values per channel, mean[c], m2[c]) by the group's; returns
// the group's count.
int64_t merge_moments_over_group(BatchStatsReducer& reducer, int channels, int64_t count, double* mean, double* m2);

// Replaces data[0, count) by its sum over the group.
void sum_over_group(BatchStatsReducer& reducer, double* data, size_t count);

}  // namespace dtrain::models
