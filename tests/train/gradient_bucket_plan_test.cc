// ResNet-50's gradient buckets as the step engines plan them (gradient_bucket_plan.h): with its
// parameters reported in backward order (the flat buffer front to back, a parameter at a time, as
// the layers report them), every bucket starts during backward, the last one started is the
// small tail, and the equal buckets of a plan that does not know the layout hold the first bucket
// back until finish (the 1000-class classifier's bias leaves an alignment gap that backward never
// reports).
#include "train/engine/gradient_bucket_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "comm/gradient_sync/gradient_buckets.h"
#include "models/resnet.h"
#include "train/config/train_config.h"

namespace dtrain::train {
namespace {

// The launch order of one step with every parameter reported in backward order.
std::vector<size_t> launches(comm::GradientBuckets& buckets, const std::vector<models::ParamSlot>& backward_order,
                             int* during_backward) {
  std::vector<size_t> order;
  const auto launch = [&](size_t i) { order.push_back(i); };
  buckets.begin_step();
  for (const models::ParamSlot& s : backward_order) {
    buckets.mark_ready(static_cast<size_t>(s.offset), static_cast<size_t>(s.offset + s.numel), launch);
  }
  *during_backward = buckets.launched_during_backward();
  buckets.finish_step(launch);
  return order;
}

TEST(GradientBucketPlan, ResNet50BucketsAllStartDuringBackwardTheSmallTailLast) {
  models::ResNetConfig config;
  config.depth = 50;
  config.num_classes = 1000;
  models::ResNet model(config);
  const models::ParameterSet& params = model.parameters();
  std::vector<models::ParamSlot> backward_order = params.slots();
  std::sort(backward_order.begin(), backward_order.end(),
            [](const models::ParamSlot& a, const models::ParamSlot& b) { return a.offset < b.offset; });

  const comm::BucketSizes sizes = gradient_bucket_sizes(default_train_config());
  comm::GradientBuckets planned(gradient_bucket_plan(params, sizes));
  int during = 0;
  const std::vector<size_t> order = launches(planned, backward_order, &during);
  EXPECT_EQ(during, static_cast<int>(planned.size())) << "every bucket starts during backward";
  ASSERT_GE(order.size(), 4u);
  const size_t last = order.back();
  EXPECT_EQ(planned.end(last), static_cast<size_t>(params.flat_size()));
  EXPECT_LE((planned.end(last) - planned.begin(last)) * 4, sizes.tail_bytes + sizes.tail_bytes / 8);
  std::printf("  ResNet-50: %lld elements in %zu buckets, the last %zu elements\n",
              static_cast<long long>(params.flat_size()), planned.size(), planned.end(last) - planned.begin(last));

  comm::GradientBuckets blind(comm::plan_buckets(static_cast<size_t>(params.flat_size()), {sizes.body_bytes, 0}));
  const std::vector<size_t> blind_order = launches(blind, backward_order, &during);
  EXPECT_EQ(during, static_cast<int>(blind.size()) - 1);
  EXPECT_EQ(blind_order.back(), 0u) << "the bucket with the classifier's gap waits for finish";
}

}  // namespace
}  // namespace dtrain::train
