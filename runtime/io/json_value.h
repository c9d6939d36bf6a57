#pragma once
// A strict JSON reader for headers that come from files we did not write (safetensors): RFC 8259
// only, nothing lenient. A duplicate key in an object, a trailing comma, a comment, a lone
// surrogate, a control character in a string, nesting deeper than kMaxDepth or anything after the
// value is an error; so is an integer that does not fit int64 where one is asked for. The writer
// is json.h; this is its reading counterpart, used where a header must be checked, not trusted.
//
// Errors: parse_json throws UsageError "<what>: <problem> at byte N"; `what` names the file.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain::runtime {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  static constexpr int kMaxDepth = 64;

  Type type() const { return type_; }
  bool is(Type t) const { return type_ == t; }
  bool boolean() const { return bool_; }
  const std::string& string() const { return text_; }  // a string's value; a number's text as written
  const std::vector<JsonValue>& array() const { return array_; }
  // Object members in the order written (keys are unique: the parser refuses duplicates).
  const std::vector<std::pair<std::string, JsonValue>>& object() const { return object_; }
  // The member named `key` of an object, or null.
  const JsonValue* find(std::string_view key) const;
  // A number written as an integer (no fraction or exponent) that fits int64; false otherwise.
  bool as_int64(int64_t* out) const;
  // "null", "a boolean", "a number", "a string", "an array", "an object": for error messages.
  static const char* describe(Type t);

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool bool_ = false;
  std::string text_;
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> object_;
};

JsonValue parse_json(std::string_view text, const std::string& what);

}  // namespace dtrain::runtime
