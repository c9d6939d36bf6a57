#include "runtime/base/env.h"

#include <cerrno>
#include <cstdlib>

#include "runtime/base/error.h"

namespace dtrain::runtime {

std::optional<std::string> env_string(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

int64_t parse_int_in_range(const std::string& text, int64_t min_value, int64_t max_value, const std::string& source) {
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  DTRAIN_USAGE_CHECK(!text.empty() && end != text.c_str() && *end == '\0' && errno == 0)
      << source << "='" << text << "' is not an integer";
  DTRAIN_USAGE_CHECK(parsed >= min_value && parsed <= max_value)
      << source << "=" << parsed << " is out of range [" << min_value << ", " << max_value << "]";
  return parsed;
}

std::optional<int64_t> env_int(const char* name, int64_t min_value, int64_t max_value) {
  const std::optional<std::string> text = env_string(name);
  if (!text) return std::nullopt;
  return parse_int_in_range(*text, min_value, max_value, name);
}

}  // namespace dtrain::runtime
