#include "train/config/train_config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "comm/diagnostics/stall_inspector.h"
#include "comm/gradient_sync/gradient_sync.h"
#include "runtime/base/cli.h"
#include "runtime/base/error.h"
#include "runtime/base/process_identity.h"
#include "train/checkpoint/run_directory.h"
#include "train/config/config_help.h"
#include "train/config/resolved_config.h"

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
  for (std::string item : items) {
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL && (item == "yes" || item == "no")) {
      item = item == "yes" ? "true" : "false";
    }
    // Strings need quotes in text format; everything else parses as written. Merging the text
    // (rather than a parsed message) keeps explicit proto3 default values such as false or 0.
    const bool quote = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING;
    const std::string snippet = field->name() + ": " + (quote ? "\"" + item + "\"" : item);
    CollectErrors errors(runtime::flag_name(field->name()));
    pb::TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    DTRAIN_USAGE_CHECK(parser.MergeFromString(snippet, config))
        << runtime::flag_name(field->name()) << "=" << value << ": " << errors.first();
  }
}

// The stall thresholds: a flag wins, then the config file, then DTRAIN_STALL_WARNING_SECONDS /
// DTRAIN_STALL_ABORT_SECONDS (what dtrain-run forwards and the benchmarks read), then the default.
// Returns the log's line saying which applied.
std::string apply_stall_variables(const runtime::po::variables_map& flags, pb::TextFormat::ParseInfoTree& in_file,
                                  const std::string& path, TrainConfig* config) {
  struct Threshold {
    const char* field;
    const char* variable;
    const char* what;
  };
  const pb::Descriptor* descriptor = TrainConfig::descriptor();
  const comm::StallSettings from_env = comm::stall_settings_from_env();  // UsageError naming a bad variable
  std::ostringstream source;
  for (const Threshold& t : {Threshold{"stall_warning_seconds", "DTRAIN_STALL_WARNING_SECONDS", "warning"},
                             Threshold{"stall_abort_seconds", "DTRAIN_STALL_ABORT_SECONDS", "abort"}}) {
    const pb::FieldDescriptor* field = descriptor->FindFieldByName(t.field);
    const std::string flag = runtime::flag_name(t.field);
    std::string from;
    if (flags.count(flag.substr(2))) {
      from = flag;
    } else if (in_file.GetLocation(field, -1).line >= 0) {
      from = path;
    } else if (std::getenv(t.variable) != nullptr) {
      const bool warning = std::string(t.what) == "warning";
      config->GetReflection()->SetDouble(config, field, warning ? from_env.warning_seconds : from_env.abort_seconds);
      from = t.variable;
    } else {
      from = "default";
    }
    const double seconds = config->GetReflection()->GetDouble(*config, field);
    source << (source.tellp() > 0 ? ", " : "") << t.what << " ";
    if (seconds > 0) {
      source << seconds << " s";
    } else {
      source << "off";
    }
    source << " (" << from << ")";
  }
  return source.str();
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
  c.set_accumulation_steps(1);
  c.set_epochs(90);
  c.set_base_lr(0.1);
  c.set_warmup_epochs(5);
  c.set_lr_decay("step");
  for (int m : {30, 60, 80}) c.add_lr_milestones(m);
  c.set_momentum(0.9);
  c.set_weight_decay(1e-4);
  c.set_device("auto");
  c.set_precision("bf16");
  c.set_jpeg_decoder("cpu");
  c.set_backend("auto");
  c.set_bucket_mib(comm::kDefaultBucketMib);
  c.set_tail_bucket_mib(comm::kDefaultTailBucketMib);
  c.set_gradient_wire_dtype("auto");
  c.set_seed(42);
  c.set_log_every_steps(50);
  c.set_timing_warmup_steps(5);
  c.set_keep_checkpoints(3);
  c.set_divergence_factor(100);
  c.set_divergence_window(10);
  c.set_stop_signals("TERM,USR1");
  c.set_stall_warning_seconds(comm::StallSettings{}.warning_seconds);
  c.set_stall_abort_seconds(comm::StallSettings{}.abort_seconds);
  c.set_bn_sync_group(1);
  c.set_timeline_steps("10:12");  // after the first steps' warm-up (cuDNN's algorithm search, the allocator)
  c.set_profile_steps("21:40");
  return c;
}

void complete_stored_config(TrainConfig* stored) {
  if (stored->accumulation_steps() == 0) stored->set_accumulation_steps(1);
  if (stored->bn_sync_group() == 0) stored->set_bn_sync_group(1);
  if (stored->timeline_steps().empty()) stored->set_timeline_steps(default_train_config().timeline_steps());
  if (stored->profile_steps().empty()) stored->set_profile_steps(default_train_config().profile_steps());
}

bool load_train_config(int argc, char** argv, ResolvedConfig* resolved) {
  // No arguments at all: the defaults would start a 90-epoch ResNet-50 run on synthetic data,
  // which is never what a new user meant.
  DTRAIN_USAGE_CHECK(argc > 1) << "dtrain-train: nothing to train. Give a config "
                                  "(dtrain-train --config configs/fashion_mnist_resnet.pbtxt) or flags (--dataset, "
                                  "--data-dir, ...; dtrain-train --help lists them)";
  TrainConfig loaded = default_train_config();
  TrainConfig* config = &loaded;
  const pb::Descriptor* descriptor = TrainConfig::descriptor();
  // One flag per TrainConfig field, generated from the message, so no flag list drifts from it.
  // The help text is config_help.cc's; Boost only parses.
  runtime::po::options_description options;
  options.add_options()("config", runtime::po::value<std::string>());
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const pb::FieldDescriptor* field = descriptor->field(f);
    const std::string flag = runtime::flag_name(field->name()).substr(2);
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL) {
      options.add_options()(flag.c_str(), runtime::po::value<std::string>()->implicit_value("true"));
    } else {
      options.add_options()(flag.c_str(), runtime::po::value<std::string>());
    }
  }
  const runtime::ParsedCommandLine cli = runtime::parse_command_line(argc, argv, options);
  if (cli.help) {
    if (runtime::is_world_rank_zero()) std::cout << train_help();
    return false;
  }
  const std::string path = cli.values.count("config") ? cli.values["config"].as<std::string>() : std::string();
  pb::TextFormat::ParseInfoTree in_file;  // which fields the config file sets
  if (cli.values.count("config")) {
    DTRAIN_USAGE_CHECK(!std::filesystem::is_directory(path))
        << "--config " << path << ": is a directory, not a config file";
    std::ifstream in(path);
    DTRAIN_USAGE_CHECK(in.good()) << "--config " << path << ": cannot open the file";
    std::stringstream text;
    text << in.rdbuf();
    CollectErrors errors(path);
    pb::TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    parser.WriteLocationsTo(&in_file);
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
    const std::string flag = runtime::flag_name(field->name()).substr(2);
    if (cli.values.count(flag)) set_field(config, field, cli.values[flag].as<std::string>());
  }
  const std::string stall_source = apply_stall_variables(cli.values, in_file, path, config);
  *resolved = resolve(loaded);  // every problem reported now, before MPI starts
  resolved->stall_source = stall_source;
  if (resolved->run_dir.empty()) {  // neither run_dir nor checkpoint_dir: a new directory of its own
    resolved->run_dir = default_run_dir(path, std::chrono::system_clock::now());
    resolved->fresh_run_dir = true;
  }
  return true;
}

}  // namespace dtrain::train
