#pragma once
// The one JSON writer of dtrain (the metrics log, the benchmarks' result files): objects built
// field by field, strings escaped, a non-finite number written as null (JSON has no NaN).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::runtime {

// `text` as a JSON string literal: quoted, with ", \ and control characters escaped.
std::string json_string(std::string_view text);
// `value` printed with the printf `format` (default: 9 significant digits), or null if not finite.
std::string json_number(double value, const char* format = "%.9g");
// [a, b, ...] of values that are JSON already; with an `indent`, one value per line.
std::string json_array(const std::vector<std::string>& values, std::string_view indent = {});

class JsonObject {
 public:
  JsonObject& text(std::string_view key, std::string_view value);
  JsonObject& number(std::string_view key, double value, const char* format = "%.9g");
  JsonObject& integer(std::string_view key, int64_t value);
  JsonObject& boolean(std::string_view key, bool value);
  JsonObject& raw(std::string_view key, std::string_view json);  // a value that is JSON already
  // {"key": value, ...} on one line; with an `indent`, one field per line.
  std::string str(std::string_view indent = {}) const;

 private:
  JsonObject& field(std::string_view key, std::string_view json);
  std::vector<std::string> fields_;  // "key": value
};

}  // namespace dtrain::runtime
