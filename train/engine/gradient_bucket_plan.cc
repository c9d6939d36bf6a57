#include "train/engine/gradient_bucket_plan.h"

#include <vector>

namespace dtrain::train {

comm::BucketSizes gradient_bucket_sizes(const proto::TrainConfig& config) {
  return comm::bucket_sizes_mib(config.bucket_mib(), config.tail_bucket_mib(), config.first_bucket_mib());
}

comm::BucketPlan gradient_bucket_plan(const models::ParameterSet& layout, const comm::BucketSizes& sizes) {
  std::vector<comm::GradientRange> ranges;
  for (const models::ParamSlot& slot : layout.slots()) {
    ranges.push_back({static_cast<size_t>(slot.offset), static_cast<size_t>(slot.offset + slot.numel)});
  }
  return comm::plan_buckets(static_cast<size_t>(layout.flat_size()), sizes, ranges);
}

}  // namespace dtrain::train
