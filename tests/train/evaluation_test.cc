// Evaluation counting on the CPU path (train::count_hits): a diverged model never looks accurate.
// A row of logits holding NaN or an infinity is a miss for top-1 and top-5, whatever its label.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "train/engine/step_engine.h"

namespace dtrain::train {
namespace {

TEST(Evaluation, NonFiniteLogitsAreNeverHits) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  long top1 = 0, top5 = 0;
  const std::vector<float> all_nan(10, nan);
  count_hits(all_nan.data(), 10, 3, &top1, &top5);
  for (float bad : {nan, inf, -inf}) {
    std::vector<float> row = {0.1f, 2.0f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f};
    row[7] = bad;  // not the label's logit
    count_hits(row.data(), 10, 1, &top1, &top5);
    row[7] = 0.8f;
    row[1] = bad;  // the label's
    count_hits(row.data(), 10, 1, &top1, &top5);
  }
  EXPECT_EQ(top1, 0);
  EXPECT_EQ(top5, 0);
  const std::vector<float> fine = {0.1f, 2.0f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f};
  count_hits(fine.data(), 10, 1, &top1, &top5);
  count_hits(fine.data(), 10, 6, &top1, &top5);  // 4th highest: a top-5 hit only
  EXPECT_EQ(top1, 1);
  EXPECT_EQ(top5, 2);
}

}  // namespace
}  // namespace dtrain::train
