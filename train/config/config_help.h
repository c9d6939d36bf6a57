#pragma once
// dtrain-train --help: one line per TrainConfig field (its flag, the kind of value, the first
// sentence of the field's comment in train_config.proto, its default), grouped into sections by
// field number as the proto's header describes. The comments come from the proto itself (a
// descriptor set with source info, embedded at build time), so help and config cannot drift.
#include <google/protobuf/descriptor.h>

#include <string>

namespace dtrain::train {

// The field's comment in train_config.proto, joined into one paragraph; "" if it has none.
std::string field_description(const google::protobuf::FieldDescriptor* field);

// Its first sentence: the --help summary.
std::string field_summary(const google::protobuf::FieldDescriptor* field);

// The --help section a field belongs to ("Model", "Data", ...), from its number.
std::string field_section(const google::protobuf::FieldDescriptor* field);

// The whole --help text of dtrain-train.
std::string train_help();

}  // namespace dtrain::train
