#include "train/checkpoint/checkpoint_model.h"

#include "runtime/base/error.h"
#include "train/checkpoint/checkpoint.h"
#include "train/config/resolved_config.h"

namespace dtrain::train {
namespace {

// The value to use: the caller's where given (and consistent with the header's), else the header's.
int pick(const char* what, int given, int stored, const std::string& path) {
  DTRAIN_USAGE_CHECK(given == 0 || stored == 0 || given == stored)
      << "checkpoint " << path << " holds a model of " << stored << " " << what << ", not " << given;
  return given != 0 ? given : stored;
}

}  // namespace

CheckpointModel read_checkpoint_model(const std::string& path, int num_classes, int in_channels) {
  CheckpointModel out;
  read_checkpoint(path, &out.header, {});
  const ResolvedConfig config = resolve(out.header.config());
  int classes = pick("classes", num_classes, out.header.num_classes(), path);
  int channels = pick("input channels", in_channels, out.header.in_channels(), path);
  // Files written before the header held them: the datasets whose shape the config fixes.
  if (config.dataset == DatasetKind::kFashionMnist) {
    classes = classes ? classes : 10;
    channels = channels ? channels : 1;
  } else if (config.dataset == DatasetKind::kSynthetic) {
    classes = classes ? classes : 1000;
    channels = channels ? channels : 3;
  }
  DTRAIN_USAGE_CHECK(classes > 0 && channels > 0)
      << "checkpoint " << path << " was written before dtrain recorded the class count of an image-folder dataset: "
      << "give --num-classes N (the number of class folders) and --in-channels 3";
  out.model = resnet_config(config, classes, channels);
  return out;
}

void read_checkpoint_weights(const std::string& path, models::ParameterSet& params) {
  proto::CheckpointHeader header;
  read_checkpoint(path, &header,
                  {{"params", params.params_flat(), static_cast<size_t>(params.flat_size())},
                   {"bn_state", params.state_flat(), static_cast<size_t>(params.state_count())}});
}

}  // namespace dtrain::train
