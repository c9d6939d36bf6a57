#pragma once
// A dtrain ResNet's weights as torchvision's state_dict, in a safetensors file (core/safetensors.h),
// both ways.
//
// The mapping: models/resnet_plan.h names every layer as torchvision's ResNet does (conv1, bn1,
// layer<s>.<b>.conv1..3 / bn1..3, layer<s>.<b>.downsample.0 / .1, fc), and the host layout is
// torchvision's too (convolutions [out, in, kh, kw], the classifier [out, in], BN vectors
// [channels], fp32, BN running_var the unbiased variance with momentum 0.1 and eps 1e-5), so each
// parameter and BN state slot is one tensor under its own name. torchvision has one tensor more per
// BN layer, "<bn>.num_batches_tracked" (I64, a scalar), which PyTorch only reads when a BN's
// momentum is None; dtrain-export writes the number of training-mode forward passes (steps x
// accumulation_steps, which is what PyTorch counts), import checks its dtype and shape and ignores it.
// ResNet-18/34/50/101/152 load into torchvision.models.resnet<depth>() with strict=True.
// small-resnet (3x3 stem, no max pool, its own stages) has no torchvision constructor: its file
// uses the same names and conventions, for a model built the same way.
//
// Import is strict: every tensor the model has, none it does not, each with its exact shape and
// dtype F32 (num_batches_tracked: I64, []); otherwise a UsageError naming the file and the tensor.
// With reinit_classifier the classifier is left as the caller initialized it and the file's
// classifier tensors, of any shape, are ignored (fine-tuning to another class count).
#include <cstdint>
#include <string>

#include "models/parameter_set.h"
#include "models/resnet_plan.h"
#include "runtime/io/safetensors.h"

namespace dtrain::train {

// Writes every parameter and BN state tensor of `params`, and num_batches_tracked for every BN
// layer, to `path` atomically.
void export_torchvision_weights(const std::string& path, models::ParameterSet& params, int64_t num_batches_tracked,
                                const runtime::SafetensorsMetadata& metadata);

struct WeightImport {
  bool reinit_classifier = false;
  std::string classifier = models::kClassifierName;  // the classifier's layer name
};

// Reads `path` into the parameters and BN state of `params` (every check first, so a refused file
// changes nothing). Returns a summary for the log ("N tensors (M values) from PATH ...").
std::string import_torchvision_weights(const std::string& path, models::ParameterSet& params,
                                       const WeightImport& options);

}  // namespace dtrain::train
