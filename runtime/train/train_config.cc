#include "runtime/train/train_config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "runtime/core/cli.h"
#include "runtime/core/error.h"
#include "runtime/core/process_identity.h"
#include "runtime/train/resolved_config.h"

namespace dtrain::train {
namespace {

namespace pb = google::protobuf;

class CollectErrors final : public pb::io::ErrorCollector {
 public:
  explicit CollectErrors(std::string source) : source_(std::move(source)) {}
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (first_.empty())
      first_ = source_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
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
    DTRAIN_USAGE_CHECK(parser.MergeFromString(snippet, config))
        << "--" << field->name() << "=" << value << ": " << errors.first();
  }
}

// "default 0.1": the field's value in the defaults, for --help.
std::string default_text(const pb::FieldDescriptor* field) {
  const TrainConfig defaults = default_train_config();
  const pb::Reflection* r = defaults.GetReflection();
  if (field->is_repeated()) {
    std::string list;
    for (int i = 0; i < r->FieldSize(defaults, field); ++i) {
      std::string item;
      pb::TextFormat::PrintFieldValueToString(defaults, field, i, &item);
      list += (i ? "," : "") + item;
    }
    return list.empty() ? "(none)" : list;
  }
  std::string value;
  pb::TextFormat::PrintFieldValueToString(defaults, field, -1, &value);
  return value;
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
  c.set_val_resize(256);
  c.set_max_bad_fraction(0.001);
  c.set_synthetic_samples(1024);
  c.set_loader_threads(0);
  c.set_max_file_mib(64);
  c.set_max_image_megapixels(64);
  c.set_prefetch_batches(4);
  c.set_batch_per_rank(32);
  c.set_epochs(90);
  c.set_base_lr(0.1);
  c.set_warmup_epochs(5);
  c.set_lr_decay("step");
  for (int m : {30, 60, 80}) c.add_lr_milestones(m);
  c.set_momentum(0.9);
  c.set_weight_decay(1e-4);
  c.set_device("auto");
  c.set_precision("bf16");
  c.set_backend("auto");
  c.set_bucket_mib(25);
  c.set_gradient_wire_dtype("fp32");
  c.set_seed(42);
  c.set_log_every_steps(50);
  c.set_timing_warmup_steps(5);
  c.set_keep_checkpoints(3);
  c.set_stop_signals("TERM,USR1");
  c.set_stall_warning_seconds(60);
  return c;
}

bool load_train_config(int argc, char** argv, ResolvedConfig* resolved) {
  TrainConfig loaded = default_train_config();
  TrainConfig* config = &loaded;
  const pb::Descriptor* descriptor = TrainConfig::descriptor();
  // One flag per TrainConfig field, generated from the message, so no flag list drifts from it.
  core::po::options_description options(
      "dtrain-train options (every TrainConfig field; repeated fields take a comma list)");
  options.add_options()("config", core::po::value<std::string>(),
                        "a text-format TrainConfig file, e.g. configs/fashion_mnist_resnet.pbtxt");
  std::vector<std::string> help(static_cast<size_t>(descriptor->field_count()));
  // Each field also answers to its hyphenated spelling (--metrics-file as well as --metrics_file).
  std::vector<std::string> aliases(static_cast<size_t>(descriptor->field_count()));
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const std::string& name = descriptor->field(f)->name();
    help[static_cast<size_t>(f)] = "default " + default_text(descriptor->field(f));
    options.add_options()(name.c_str(), core::po::value<std::string>(), help[static_cast<size_t>(f)].c_str());
    std::string& alias = aliases[static_cast<size_t>(f)];
    alias = name;
    std::replace(alias.begin(), alias.end(), '_', '-');
    if (alias != name) options.add_options()(alias.c_str(), core::po::value<std::string>(), "  (same)");
  }
  const core::ParsedCommandLine cli = core::parse_command_line(argc, argv, options);
  if (cli.help) {
    if (core::is_world_rank_zero()) std::cout << core::usage("dtrain-train", options);
    return false;
  }
  if (cli.values.count("config")) {
    const std::string path = cli.values["config"].as<std::string>();
    DTRAIN_USAGE_CHECK(!std::filesystem::is_directory(path))
        << "--config " << path << ": is a directory, not a config file";
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
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const pb::FieldDescriptor* field = descriptor->field(f);
    const std::string& alias = aliases[static_cast<size_t>(f)];
    // Both spellings given: neither wins silently.
    DTRAIN_USAGE_CHECK(alias == field->name() || !cli.values.count(alias) || !cli.values.count(field->name()))
        << "--" << alias << " " << cli.values[alias].as<std::string>() << " and --" << field->name() << " "
        << cli.values[field->name()].as<std::string>() << " set the same field " << field->name() << ": give it once";
    if (cli.values.count(field->name())) set_field(config, field, cli.values[field->name()].as<std::string>());
    if (alias != field->name() && cli.values.count(alias)) {
      set_field(config, field, cli.values[alias].as<std::string>());
    }
  }
  *resolved = resolve(loaded);  // every problem reported now, before MPI starts
  return true;
}

std::string describe(const TrainConfig& config) {
  std::string text;
  pb::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintToString(config, &text);
  return text;
}

}  // namespace dtrain::train
