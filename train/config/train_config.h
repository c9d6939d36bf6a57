#pragma once
// Loading the TrainConfig: defaults, then a text-format file, then flag overrides (one flag per
// field, generated from the message itself, so there is one parser and no flag list to keep in
// sync). Unknown fields, malformed values and impossible combinations are UsageErrors that name
// the file and line or the flag.
#include <string>

#include "train/proto/train_config.pb.h"

namespace dtrain::train {

using proto::TrainConfig;
struct ResolvedConfig;  // resolved_config.h

TrainConfig default_train_config();

// A config read back from a checkpoint written before some fields existed: those fields read as
// proto3's zero, which for some of them is no valid value (accumulation_steps, bn_sync_group) or
// not their old behaviour. Sets each to the value that gives the behaviour of the time (K = 1, no
// BN groups, the default timeline range). Every reader of a stored config sees it completed.
void complete_stored_config(TrainConfig* stored);

// argv: `--config FILE` and `--field-name=VALUE` / `--field-name VALUE` for any field (options
// generated from the message; core/cli.h's rules: underscores work, the last of a repeated flag
// wins, a bool field is a switch); repeated fields take a comma-separated list. No arguments at
// all is a UsageError. Returns false (help printed by rank 0) for --help. Checks the result
// (resolve(), resolved_config.h).
bool load_train_config(int argc, char** argv, ResolvedConfig* config);

}  // namespace dtrain::train
