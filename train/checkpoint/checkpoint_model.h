#pragma once
// A checkpoint's network outside training (dtrain-export, the logits check): the ResNet its stored
// config describes, and its parameters and BN state read into a model's ParameterSet. The data
// are not needed: the class count and input channels come from the header (files of older
// versions lack them; the caller then passes them, and they are checked against the tensors'
// sizes).
#include <string>

#include "models/parameter_set.h"
#include "models/resnet_plan.h"
#include "train/proto/checkpoint.pb.h"

namespace dtrain::train {

struct CheckpointModel {
  proto::CheckpointHeader header;  // verified; its tensors not read yet
  models::ResNetConfig model;
};

// Reads and verifies the header of `path`. num_classes / in_channels: 0 to take the header's; a
// value the header contradicts is a UsageError naming both. UsageError naming the file if it is
// not a checkpoint, is corrupt, or (older files) the class count cannot be known.
CheckpointModel read_checkpoint_model(const std::string& path, int num_classes = 0, int in_channels = 0);

// The checkpoint's parameters and BN state into `params` (a network built from the model above).
// UsageError naming the file and tensor if they do not fit.
void read_checkpoint_weights(const std::string& path, models::ParameterSet& params);

}  // namespace dtrain::train
