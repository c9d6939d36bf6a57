#pragma once
// Synchronized-BN tests without MPI: the ranks of a BN group are threads of this process, each
// with its own Member (a models::BatchStatsReducer). all_gather writes the thread's block, waits for
// every rank's, copies them all, and waits again before a block may be overwritten.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <vector>

#include "models/batch_stats_reducer.h"

namespace dtrain::test {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), sync_(size), blocks_(static_cast<size_t>(size)) {}

  class Member final : public models::BatchStatsReducer {
   public:
    Member(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
    int group_size() const override { return group_.size_; }
    void all_gather(const double* mine, size_t count, double* all) override {
      ++calls;
      group_.blocks_[static_cast<size_t>(rank_)].assign(mine, mine + count);
      group_.sync_.arrive_and_wait();
      for (int r = 0; r < group_.size_; ++r) {
        const std::vector<double>& theirs = group_.blocks_[static_cast<size_t>(r)];
        // EXPECT, not ASSERT: returning early would leave the other threads at the barrier.
        EXPECT_EQ(theirs.size(), count) << "rank " << r << " gathered a different count";
        std::copy_n(theirs.begin(), std::min(count, theirs.size()), all + static_cast<size_t>(r) * count);
      }
      group_.sync_.arrive_and_wait();
    }
    int calls = 0;  // all_gather calls of this rank

   private:
    ThreadGroup& group_;
    int rank_;
  };

 private:
  int size_;
  std::barrier<> sync_;
  std::vector<std::vector<double>> blocks_;
};

}  // namespace dtrain::test
