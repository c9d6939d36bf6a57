#pragma once
// Reading DTRAIN_* environment variables. A malformed value is a UsageError that names the
// variable and the value, never a silent default.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtrain::runtime {

// The variable's value, or nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);

// Parses a whole decimal integer in [min_value, max_value]; throws UsageError otherwise.
int64_t parse_int_in_range(const std::string& text, int64_t min_value, int64_t max_value, const std::string& source);

// The variable parsed with parse_int_in_range, or nullopt when unset.
std::optional<int64_t> env_int(const char* name, int64_t min_value, int64_t max_value);

// The DTRAIN_* variables set in this environment that no dtrain tool or script reads (a typo, or
// a flag given as a variable: DTRAIN_BATCH_PER_RANK), for a warning; docs/configuration.md lists
// the ones read. DTRAIN_TEST_* (the test suite's) are not reported.
std::vector<std::string> unread_dtrain_variables();

}  // namespace dtrain::runtime
