#pragma once
// The effective config for people: config.pbtxt in the run directory and the short summary the
// log gives at start. Checkpoints keep the full TrainConfig; these leave out what does not apply.
#include <string>

#include "train/config/resolved_config.h"

namespace dtrain::train {

// Whether a field matters for this run: false for depth under small-resnet, blocks_per_stage,
// width and bottleneck under resnet, lr_milestones under cosine, gradient_wire_dtype on GPUs unless
// the backend is hierarchical, mpi-ring or auto, data_dir for synthetic data, checkpoint settings without
// checkpoint_dir, and the like.
bool field_applies(const ResolvedConfig& config, const std::string& field);

// Multi-line text format (one `name: value` per line, repeated fields as [a, b]), every field that
// applies with its value (defaults included, so nothing is left to guess), grouped under --help's
// section names as comments. `header`: comment lines to put first (without the "# ").
// TextFormat parses it back, so --config accepts the file.
std::string config_text(const ResolvedConfig& config, const std::string& header);

// One line for the log: model, data, batch and epochs, schedule, device and backend.
std::string config_summary(const ResolvedConfig& config);

}  // namespace dtrain::train
