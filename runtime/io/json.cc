#include "runtime/io/json.h"

#include <cmath>
#include <cstdio>

namespace dtrain::runtime {

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;  // UTF-8 passes through unchanged
        }
    }
  }
  return out + "\"";
}

std::string json_number(double value, const char* format) {
  if (!std::isfinite(value)) return "null";
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

namespace {
// open + values separated by commas + close; with an indent, each value on a line of its own.
std::string join(char open, const std::vector<std::string>& values, std::string_view indent, char close) {
  if (values.empty()) return std::string{open, close};
  std::string line_start = "\n";
  line_start += indent;
  std::string out(1, open);
  if (!indent.empty()) out += line_start;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += indent.empty() ? ", " : "," + line_start;
    out += values[i];
  }
  if (!indent.empty()) out += "\n";
  return out + close;
}
}  // namespace

std::string json_array(const std::vector<std::string>& values, std::string_view indent) {
  return join('[', values, indent, ']');
}

JsonObject& JsonObject::field(std::string_view key, std::string_view json) {
  fields_.push_back(json_string(key) + ": " + std::string(json));
  return *this;
}

JsonObject& JsonObject::text(std::string_view key, std::string_view value) {
  return field(key, json_string(value));
}
JsonObject& JsonObject::number(std::string_view key, double value, const char* format) {
  return field(key, json_number(value, format));
}
JsonObject& JsonObject::integer(std::string_view key, int64_t value) {
  return field(key, std::to_string(value));
}
JsonObject& JsonObject::boolean(std::string_view key, bool value) {
  return field(key, value ? "true" : "false");
}
JsonObject& JsonObject::raw(std::string_view key, std::string_view json) {
  return field(key, json);
}
std::string JsonObject::str(std::string_view indent) const {
  return join('{', fields_, indent, '}');
}

}  // namespace dtrain::runtime
