#include "train/config/config_help.h"

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/text_format.h>

#include <cctype>
#include <map>
#include <sstream>
#include <string_view>

#include "runtime/base/cli.h"
#include "runtime/base/error.h"
#include "train/config/train_config.h"

namespace dtrain::generated {
std::string_view train_config_descriptor_set();  // cmake/EmbedFile.cmake
}

namespace dtrain::train {
namespace {

namespace pb = google::protobuf;

struct Section {
  const char* title;
  int first;
  int last;
};
// The ranges train_config.proto's header gives.
constexpr Section kSections[] = {{"Model", 1, 9},
                                 {"Data", 10, 19},
                                 {"Optimization", 20, 39},
                                 {"Devices and communication", 40, 49},
                                 {"Seed and logging", 50, 59},
                                 {"Checkpoints and preemption", 60, 69},
                                 {"Failure detection", 70, 79},
                                 {"Fine-tuning", 80, 84},
                                 {"Training loop", 85, 89},
                                 {"Synchronized batch norm", 90, 92},
                                 {"Profiling", 93, 94}};

std::string trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \n");
  const size_t end = text.find_last_not_of(" \n");
  return begin == std::string::npos ? std::string() : text.substr(begin, end - begin + 1);
}

// Field name -> its leading comment (plus a trailing one), one paragraph.
const std::map<std::string, std::string>& comments() {
  static const std::map<std::string, std::string> table = [] {
    std::map<std::string, std::string> out;
    pb::FileDescriptorSet set;
    const std::string_view bytes = generated::train_config_descriptor_set();
    DTRAIN_CHECK(set.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) && set.file_size() == 1)
        << "the embedded train_config descriptor set does not parse";
    const pb::FileDescriptorProto& file = set.file(0);
    int message = -1;
    for (int m = 0; m < file.message_type_size(); ++m) {
      if (file.message_type(m).name() == "TrainConfig") message = m;
    }
    DTRAIN_CHECK(message >= 0) << "no TrainConfig in the embedded descriptor set";
    // A field's location path is {4 (message_type), message, 2 (field), field}.
    for (const pb::SourceCodeInfo::Location& location : file.source_code_info().location()) {
      if (location.path_size() != 4 || location.path(0) != 4 || location.path(1) != message || location.path(2) != 2) {
        continue;
      }
      std::string text = location.leading_comments() + " " + location.trailing_comments();
      for (char& c : text) {
        if (c == '\n') c = ' ';
      }
      std::string joined;
      for (char c : trimmed(text)) {
        if (c != ' ' || joined.empty() || joined.back() != ' ') joined += c;
      }
      out[file.message_type(message).field(location.path(3)).name()] = joined;
    }
    return out;
  }();
  return table;
}

// "N", "X", "TEXT", "N,...": what the flag takes; "" for a switch.
const char* value_kind(const pb::FieldDescriptor* field) {
  const bool list = field->is_repeated();
  switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_BOOL: return "";
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
    case pb::FieldDescriptor::CPPTYPE_FLOAT: return list ? "X,..." : "X";
    case pb::FieldDescriptor::CPPTYPE_STRING: return list ? "TEXT,..." : "TEXT";
    default: return list ? "N,..." : "N";
  }
}

std::string default_text(const pb::FieldDescriptor* field) {
  const TrainConfig defaults = default_train_config();
  const pb::Reflection* r = defaults.GetReflection();
  std::string text;
  if (field->has_presence() && !field->is_repeated() && !r->HasField(defaults, field)) return text;  // "unset: ..."
  if (field->is_repeated()) {
    for (int i = 0; i < r->FieldSize(defaults, field); ++i) {
      std::string item;
      pb::TextFormat::PrintFieldValueToString(defaults, field, i, &item);
      if (i > 0) text += ',';
      text += item;
    }
  } else {
    pb::TextFormat::PrintFieldValueToString(defaults, field, -1, &text);
  }
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
  return text;
}

}  // namespace

std::string field_description(const pb::FieldDescriptor* field) {
  const auto found = comments().find(field->name());
  return found == comments().end() ? std::string() : found->second;
}

std::string field_summary(const pb::FieldDescriptor* field) {
  const std::string text = field_description(field);
  // A sentence ends at ". " before a capital ("e.g. base_lr" does not end one).
  for (size_t end = text.find(". "); end != std::string::npos; end = text.find(". ", end + 1)) {
    if (end + 2 < text.size() && std::isupper(static_cast<unsigned char>(text[end + 2])))
      return text.substr(0, end + 1);
  }
  return text;
}

std::string field_section(const pb::FieldDescriptor* field) {
  for (const Section& s : kSections) {
    if (field->number() >= s.first && field->number() <= s.last) return s.title;
  }
  return "Other";
}

std::string train_help() {
  std::ostringstream out;
  out << "usage: dtrain-train [--config FILE] [--FLAG VALUE ...]\n"
         "Trains a ResNet data-parallel, one rank per GPU (mpirun -np N, srun, or dtrain-run).\n"
         "Flags override the config file (text-format TrainConfig, configs/*.pbtxt); the last of a\n"
         "repeated flag wins; underscores in flag names work as hyphens; a switch works bare (--nesterov) or\n"
         "with a value (--nesterov=false). Lists are comma-separated.\n\n"
         "  --config FILE                      a text-format TrainConfig file\n"
         "  --help, -h                         print this help and exit\n"
         "  --version                          print the version and exit\n";
  const pb::Descriptor* descriptor = TrainConfig::descriptor();
  for (const Section& s : kSections) {
    out << "\n" << s.title << ":\n";
    for (int f = 0; f < descriptor->field_count(); ++f) {
      const pb::FieldDescriptor* field = descriptor->field(f);
      if (field_section(field) != s.title) continue;
      std::string flag = runtime::flag_name(field->name());
      const std::string kind = value_kind(field);
      if (!kind.empty()) {
        flag += ' ';
        flag += kind;
      }
      out << "  " << flag;
      for (size_t pad = flag.size(); pad < 33; ++pad) out << ' ';
      out << "  " << field_summary(field);
      const std::string fallback = default_text(field);
      // A switch shows its default where it is on (bottleneck); off is what a switch means unset.
      if (!fallback.empty() && (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_BOOL || fallback == "true")) {
        out << " [" << fallback << "]";
      }
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace dtrain::train
