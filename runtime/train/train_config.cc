#include "runtime/train/train_config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "runtime/core/error.h"
#include "runtime/core/process_identity.h"

namespace dtrain::train {
namespace {

namespace pb = google::protobuf;

class CollectErrors final : public pb::io::ErrorCollector {
 public:
  explicit CollectErrors(std::string source) : source_(std::move(source)) {}
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (first_.empty()) first_ = source_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  const std::string& first() const { return first_; }

 private:
  std::string source_;
  std::string first_;
};

void set_field(TrainConfig* config, const pb::FieldDescriptor* field, const std::string& value) {
  std::vector<std::string> items;
  if (field->is_repeated()) {
    config->GetReflection()->ClearField(config, field);
    std::stringstream in(value);
    for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  } else {
    items.push_back(value);
  }
  for (const std::string& item : items) {
    // Strings need quotes in text format; everything else parses as written. Merging the text
    // (rather than a parsed message) keeps explicit proto3 default values such as false or 0.
    const bool quote = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING;
    const std::string snippet = field->name() + ": " + (quote ? "\"" + item + "\"" : item);
    CollectErrors errors("--" + field->name());
    pb::TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    DTRAIN_USAGE_CHECK(parser.MergeFromString(snippet, config)) << "--" << field->name() << "=" << value << ": "
                                                                 << errors.first();
  }
}

std::string usage_text() {
  std::ostringstream out;
  out << "usage: dtrain-train [--config FILE.pbtxt] [--FIELD=VALUE ...]\n\nfields (TrainConfig), defaults:\n";
  const TrainConfig defaults = default_train_config();
  const pb::Descriptor* d = TrainConfig::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    std::string value;
    pb::TextFormat::PrintFieldValueToString(defaults, d->field(i), d->field(i)->is_repeated() ? 0 : -1, &value);
    if (d->field(i)->is_repeated() && defaults.GetReflection()->FieldSize(defaults, d->field(i)) == 0) value = "(none)";
    out << "  --" << d->field(i)->name() << " " << value << "\n";
  }
  return out.str();
}

}  // namespace

TrainConfig default_train_config() {
  TrainConfig c;
  c.set_model("resnet");
  c.set_depth(50);
  c.set_bottleneck(true);
  c.set_width(64);
  c.set_dataset("synthetic");
  c.set_image_size(224);
  c.set_synthetic_samples(1024);
  c.set_loader_threads(2);
  c.set_prefetch_batches(4);
  c.set_batch_per_rank(32);
  c.set_epochs(90);
  c.set_base_lr(0.1);
  c.set_warmup_epochs(5);
  c.set_lr_decay("step");
  for (int m : {30, 60, 80}) c.add_lr_milestones(m);
  c.set_momentum(0.9);
  c.set_weight_decay(1e-4);
  c.set_backend("auto");
  c.set_bucket_mib(25);
  c.set_gradient_wire_dtype("fp32");
  c.set_seed(42);
  c.set_log_every_steps(50);
  return c;
}

bool load_train_config(int argc, char** argv, TrainConfig* config) {
  *config = default_train_config();
  const pb::Descriptor* descriptor = TrainConfig::descriptor();
  // The config file first, wherever --config appears, so flags override it.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      if (core::is_world_rank_zero()) std::cout << usage_text();
      return false;
    }
    std::string path;
    if (arg.rfind("--config=", 0) == 0) path = arg.substr(9);
    if (arg == "--config") {
      DTRAIN_USAGE_CHECK(i + 1 < argc) << "--config needs a file";
      path = argv[i + 1];
    }
    if (path.empty()) continue;
    std::ifstream in(path);
    DTRAIN_USAGE_CHECK(in.good()) << "--config " << path << ": cannot open the file";
    std::stringstream text;
    text << in.rdbuf();
    CollectErrors errors(path);
    pb::TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    TrainConfig from_file;
    DTRAIN_USAGE_CHECK(parser.ParseFromString(text.str(), &from_file)) << errors.first();
    // Repeated fields in the file replace the defaults instead of appending to them. Then merge the
    // text itself, not the parsed message: MergeFrom would drop values equal to proto3 defaults
    // (bottleneck: false, say) that the file sets explicitly.
    for (int f = 0; f < descriptor->field_count(); ++f) {
      const pb::FieldDescriptor* field = descriptor->field(f);
      if (field->is_repeated() && from_file.GetReflection()->FieldSize(from_file, field) > 0) {
        config->GetReflection()->ClearField(config, field);
      }
    }
    DTRAIN_USAGE_CHECK(parser.MergeFromString(text.str(), config)) << errors.first();
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--config") {
      ++i;
      continue;
    }
    if (arg.rfind("--config=", 0) == 0) continue;
    DTRAIN_USAGE_CHECK(arg.rfind("--", 0) == 0) << "unexpected argument '" << arg << "' (fields are set as --FIELD=VALUE)";
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else {
      DTRAIN_USAGE_CHECK(i + 1 < argc) << "--" << name << " needs a value";
      value = argv[++i];
    }
    const pb::FieldDescriptor* field = descriptor->FindFieldByName(name);
    DTRAIN_USAGE_CHECK(field != nullptr) << "unknown flag --" << name << " (run dtrain-train --help for the fields)";
    set_field(config, field, value);
  }
  validate(*config);
  return true;
}

void validate(const TrainConfig& c) {
  DTRAIN_USAGE_CHECK(c.model() == "resnet" || c.model() == "small-resnet")
      << "model '" << c.model() << "': use resnet or small-resnet";
  DTRAIN_USAGE_CHECK(c.dataset() == "synthetic" || c.dataset() == "fashion-mnist")
      << "dataset '" << c.dataset() << "': use synthetic or fashion-mnist (ImageNet folders come next)";
  DTRAIN_USAGE_CHECK(c.dataset() != "fashion-mnist" || c.model() == "small-resnet")
      << "dataset fashion-mnist (28x28) needs model small-resnet";
  DTRAIN_USAGE_CHECK(c.batch_per_rank() > 0) << "batch_per_rank must be positive, got " << c.batch_per_rank();
  DTRAIN_USAGE_CHECK(c.epochs() > 0) << "epochs must be positive, got " << c.epochs();
  DTRAIN_USAGE_CHECK(c.lr_decay() == "step" || c.lr_decay() == "cosine") << "lr_decay '" << c.lr_decay()
                                                                         << "': use step or cosine";
  DTRAIN_USAGE_CHECK(c.bucket_mib() > 0) << "bucket_mib must be positive";
  DTRAIN_USAGE_CHECK(c.label_smoothing() >= 0 && c.label_smoothing() < 1) << "label_smoothing outside [0, 1)";
  DTRAIN_USAGE_CHECK(c.loader_threads() > 0 && c.prefetch_batches() > 0) << "loader_threads and prefetch_batches must be positive";
  DTRAIN_USAGE_CHECK(c.max_steps_per_epoch() >= 0) << "max_steps_per_epoch must not be negative";
  DTRAIN_USAGE_CHECK(c.max_validation_batches() >= 0) << "max_validation_batches must not be negative";
  DTRAIN_USAGE_CHECK(c.model() != "small-resnet" || c.blocks_per_stage_size() > 0)
      << "small-resnet needs blocks_per_stage (e.g. --blocks_per_stage=1,1,1)";
}

std::string describe(const TrainConfig& config) {
  std::string text;
  pb::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintToString(config, &text);
  return text;
}

}  // namespace dtrain::train
