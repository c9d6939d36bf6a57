#pragma once
// What a resume may change against the config stored in the checkpoint.
//  - Free: the world size, batch_per_rank and accumulation_steps (the trainer counts progress in
//    images, rescales the lr by the linear rule and deals the rest of the epoch over the new
//    ranks), bn_sync_group (which must divide the world size, so it goes with it; it only chooses
//    how many ranks' images each batch norm sees, as batch_per_rank does), and run-control fields
//    that leave the trained function alone: checkpointing, logging, the timeline, stop limits, loader threads
//    and depth, device, precision, backend, bucket size, wire dtype, bad-data limits.
//  - Everything else (model, data, schedule shape, seed) must match; a difference is a UsageError
//    naming the field and both values, unless the field is listed in resume_allow_changes.
#include <string>
#include <vector>

#include "train/proto/train_config.pb.h"

namespace dtrain::train {

// Returns the accepted differences outside the free fields ("base_lr 0.1 -> 0.2"), for the log;
// throws runtime::UsageError for the first one not accepted, or for an unknown name in
// now.resume_allow_changes(). `checkpoint` names the file in messages.
std::vector<std::string> check_resume_config(const proto::TrainConfig& saved, const proto::TrainConfig& now,
                                             const std::string& checkpoint);

}  // namespace dtrain::train
