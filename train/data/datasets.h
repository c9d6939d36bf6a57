#pragma once
// The training and validation datasets a config names: Fashion-MNIST's idx files, an ImageNet
// folder tree (train/ and val/ with the same class folders), or synthetic images. Each rank opens
// its own copy; nothing here is collective (the Trainer compares the ranks' listings afterwards).
#include <memory>

#include "train/config/resolved_config.h"
#include "train/data/dataset.h"

namespace dtrain::train {

struct Datasets {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> validation;
};

// UsageError naming the file or directory that is missing or malformed.
Datasets open_datasets(const ResolvedConfig& config);

}  // namespace dtrain::train
