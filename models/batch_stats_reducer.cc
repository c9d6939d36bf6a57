#include "models/batch_stats_reducer.h"

#include <vector>

#include "runtime/base/error.h"

namespace dtrain::models {

int64_t merge_moments_over_group(BatchStatsReducer& reducer, int channels, int64_t count, double* mean, double* m2) {
  const int ranks = reducer.group_size();
  const size_t c = static_cast<size_t>(channels);
  const size_t block = 1 + 2 * c;  // count (exact in a double below 2^53), the means, the M2s
  std::vector<double> mine(block), all(block * static_cast<size_t>(ranks));
  mine[0] = static_cast<double>(count);
  for (size_t i = 0; i < c; ++i) {
    mine[1 + i] = mean[i];
    mine[1 + c + i] = m2[i];
  }
  reducer.all_gather(mine.data(), block, all.data());
  int64_t total = 0;
  for (int r = 0; r < ranks; ++r) {
    const double* theirs = all.data() + static_cast<size_t>(r) * block;
    const int64_t nb = static_cast<int64_t>(theirs[0]);
    DTRAIN_CHECK(nb >= 0) << "batch norm group rank " << r << " reported a count of " << theirs[0];
    const int64_t n = total + nb;
    for (size_t i = 0; i < c; ++i) {
      if (r == 0 || total == 0) {
        mean[i] = theirs[1 + i];
        m2[i] = theirs[1 + c + i];
        continue;
      }
      if (nb == 0) continue;
      // Chan et al.: the moments of the union from those of its two parts.
      const double delta = theirs[1 + i] - mean[i];
      const double wb = static_cast<double>(nb) / static_cast<double>(n);
      mean[i] += delta * wb;
      m2[i] += theirs[1 + c + i] + delta * delta * static_cast<double>(total) * wb;
    }
    total = n;
  }
  return total;
}

void sum_over_group(BatchStatsReducer& reducer, double* data, size_t count) {
  const int ranks = reducer.group_size();
  std::vector<double> all(count * static_cast<size_t>(ranks));
  reducer.all_gather(data, count, all.data());
  for (size_t i = 0; i < count; ++i) data[i] = 0;
  for (int r = 0; r < ranks; ++r) {  // group-rank order: the same sum, bit for bit, on every rank
    const double* theirs = all.data() + static_cast<size_t>(r) * count;
    for (size_t i = 0; i < count; ++i) data[i] += theirs[i];
  }
}

}  // namespace dtrain::models
