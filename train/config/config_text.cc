#include "train/config/config_text.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include <set>
#include <sstream>

#include "train/config/config_help.h"

namespace dtrain::train {
namespace {

namespace pb = google::protobuf;

// The field's value as text format writes it ("[30, 60]" for a repeated one).
std::string value_text(const TrainConfig& c, const pb::FieldDescriptor* field) {
  if (!field->is_repeated()) {
    std::string text;
    pb::TextFormat::PrintFieldValueToString(c, field, -1, &text);
    return text;
  }
  std::string list = "[";
  for (int i = 0; i < c.GetReflection()->FieldSize(c, field); ++i) {
    std::string item;
    pb::TextFormat::PrintFieldValueToString(c, field, i, &item);
    list += (i ? ", " : "") + item;
  }
  return list + "]";
}

}  // namespace

bool field_applies(const ResolvedConfig& r, const std::string& field) {
  const TrainConfig& c = r.fields;
  const bool small = r.model == ModelKind::kSmallResNet;
  const bool imagenet = r.dataset == DatasetKind::kImageNet;
  static const std::set<std::string> small_resnet_only = {"blocks_per_stage", "bottleneck", "width"};
  static const std::set<std::string> imagenet_only = {"val_resize", "max_bad_fraction", "max_file_mib",
                                                      "max_image_megapixels"};
  if (small_resnet_only.count(field)) return small;
  if (imagenet_only.count(field)) return imagenet;
  if (field == "depth") return !small;
  if (field == "data_dir") return r.dataset != DatasetKind::kSynthetic;
  if (field == "image_size") return r.dataset != DatasetKind::kFashionMnist;  // idx images are 28x28
  if (field == "synthetic_samples") return r.dataset == DatasetKind::kSynthetic;
  if (field == "lr_milestones") return r.lr_decay == DecayKind::kStep;
  if (field == "gradient_wire_dtype")
    return r.device != DeviceChoice::kGpu || r.backend == comm::Backend::kAuto || comm::carries_narrow_wire(r.backend);
  if (field == "precision") return r.device != DeviceChoice::kCpu;
  if (field == "allow_gpu_sharing") return r.device != DeviceChoice::kCpu;
  if (field == "no_tf32") return r.device != DeviceChoice::kCpu && r.precision == Precision::kFp32;
  if (field == "checkpoint_every_steps" || field == "keep_checkpoints") return !c.checkpoint_dir().empty();
  if (field == "resume_allow_changes") return !c.resume().empty();
  if (field == "reinit_classifier") return !c.init_weights().empty();
  if (field == "timeline_steps") return !c.timeline().empty();
  if (field == "profile_steps") return !c.profile_out().empty();
  if (field == "run_dir") return !c.run_dir().empty();  // the default is where the file lies
  return true;
}

std::string config_text(const ResolvedConfig& r, const std::string& header) {
  std::ostringstream out;
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) out << "# " << line << "\n";
  const pb::Descriptor* d = TrainConfig::descriptor();
  std::string section;
  for (int f = 0; f < d->field_count(); ++f) {
    const pb::FieldDescriptor* field = d->field(f);
    if (!field_applies(r, field->name())) continue;
    if (field_section(field) != section) {
      section = field_section(field);
      out << "\n# " << section << "\n";
    }
    out << field->name() << ": " << value_text(r.fields, field) << "\n";
  }
  return out.str();
}

std::string config_summary(const ResolvedConfig& r) {
  const TrainConfig& c = r.fields;
  std::ostringstream s;
  if (r.model == ModelKind::kSmallResNet) {
    s << "small-resnet (blocks " << value_text(c, c.GetDescriptor()->FindFieldByName("blocks_per_stage")) << ", width "
      << c.width() << (c.bottleneck() ? ", bottleneck" : "") << ")";
  } else {
    s << "resnet-" << c.depth();
  }
  s << " on " << c.dataset();
  if (r.dataset != DatasetKind::kSynthetic) s << " (" << c.data_dir() << ")";
  s << ", batch " << c.batch_per_rank() << " per rank";
  if (c.accumulation_steps() > 1) s << " x " << c.accumulation_steps() << " accumulated micro-batches";
  s << ", " << c.epochs() << " epoch(s)";
  if (c.max_steps_per_epoch() > 0) s << " of at most " << c.max_steps_per_epoch() << " steps";
  if (c.max_total_steps() > 0) s << ", at most " << c.max_total_steps() << " steps";
  s << ", base_lr " << c.base_lr() << " " << c.lr_decay() << " decay, device " << c.device() << ", backend "
    << c.backend() << ", seed " << c.seed();
  return s.str();
}

}  // namespace dtrain::train
