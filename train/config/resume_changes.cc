#include "train/config/resume_changes.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include <set>
#include <sstream>

#include "runtime/base/error.h"

namespace dtrain::train {
namespace {

namespace pb = google::protobuf;

// Fields that never make a resume an error (see the header). init_weights and reinit_classifier
// say where a fresh run's weights come from; a resume takes them from the checkpoint instead.
const std::set<std::string>& free_fields() {
  static const std::set<std::string> fields = {"batch_per_rank",
                                               "accumulation_steps",
                                               "bn_sync_group",
                                               "checkpoint_dir",
                                               "checkpoint_every_steps",
                                               "keep_checkpoints",
                                               "resume",
                                               "resume_allow_changes",
                                               "max_total_steps",
                                               "metrics_file",
                                               "tensorboard_dir",
                                               "timeline",
                                               "timeline_steps",
                                               "profile_out",
                                               "profile_steps",
                                               "run_dir",
                                               "log_every_steps",
                                               "timing_warmup_steps",
                                               "loader_threads",
                                               "prefetch_batches",
                                               "stop_signals",
                                               "stall_warning_seconds",
                                               "stall_abort_seconds",
                                               "device",
                                               "precision",
                                               "jpeg_decoder",
                                               "no_tf32",
                                               "allow_gpu_sharing",
                                               "backend",
                                               "bucket_mib",
                                               "tail_bucket_mib",
                                               "first_bucket_mib",
                                               "gradient_wire_dtype",
                                               "max_validation_batches",
                                               "max_nonfinite_steps",
                                               "divergence_factor",
                                               "divergence_window",
                                               "max_loss",
                                               "max_checkpoint_failures",
                                               "max_bad_fraction",
                                               "max_file_mib",
                                               "max_image_megapixels",
                                               "init_weights",
                                               "reinit_classifier"};
  return fields;
}

// The field's value as text format writes it ("[1, 2]" for a repeated one).
std::string value_text(const proto::TrainConfig& c, const pb::FieldDescriptor* field) {
  const pb::Reflection* r = c.GetReflection();
  if (!field->is_repeated()) {
    std::string text;
    pb::TextFormat::PrintFieldValueToString(c, field, -1, &text);
    return text;
  }
  std::string list = "[";
  for (int i = 0; i < r->FieldSize(c, field); ++i) {
    std::string item;
    pb::TextFormat::PrintFieldValueToString(c, field, i, &item);
    list += (i ? ", " : "") + item;
  }
  return list + "]";
}

}  // namespace

std::vector<std::string> check_resume_config(const proto::TrainConfig& saved, const proto::TrainConfig& now,
                                             const std::string& checkpoint) {
  const pb::Descriptor* d = now.GetDescriptor();
  std::set<std::string> allowed;
  std::stringstream names(now.resume_allow_changes());
  for (std::string name; std::getline(names, name, ',');) {
    if (name.empty()) continue;
    DTRAIN_USAGE_CHECK(d->FindFieldByName(name) != nullptr)
        << "resume_allow_changes: '" << name << "' is not a TrainConfig field";
    allowed.insert(name);
  }
  std::vector<std::string> accepted;
  for (int f = 0; f < d->field_count(); ++f) {
    const pb::FieldDescriptor* field = d->field(f);
    if (free_fields().count(field->name())) continue;
    const std::string before = value_text(saved, field);
    const std::string after = value_text(now, field);
    if (before == after) continue;
    const std::string change = field->name() + " " + before + " -> " + after;
    DTRAIN_USAGE_CHECK(allowed.count(field->name()))
        << "checkpoint " << checkpoint << " was written with " << field->name() << " " << before << ", this run has "
        << after
        << ": only the world size, batch_per_rank, accumulation_steps and run-control fields may change on resume "
        << "(--resume_allow_changes " << field->name() << " accepts it)";
    accepted.push_back(change);
  }
  return accepted;
}

}  // namespace dtrain::train
