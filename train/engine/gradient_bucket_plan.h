#pragma once
// The gradient buckets of a model (comm/gradient_sync/bucket_plan.h) from the config's sizes and
// the model's parameter layout, for both step engines: cuts at parameter boundaries where that
// keeps the sizes, and the alignment gaps (which backward never reports) left out of each
// bucket's count. Every rank builds the same model, so every rank gets the same plan.
#include "comm/gradient_sync/bucket_plan.h"
#include "models/parameter_set.h"
#include "train/proto/train_config.pb.h"

namespace dtrain::train {

// bucket_mib, tail_bucket_mib and first_bucket_mib in bytes.
comm::BucketSizes gradient_bucket_sizes(const proto::TrainConfig& config);

comm::BucketPlan gradient_bucket_plan(const models::ParameterSet& layout, const comm::BucketSizes& sizes);

}  // namespace dtrain::train
