#pragma once
// Leveled logging with a time and rank prefix, one whole line per write so ranks never interleave
// mid-line:
//   2026-11-23T12:40:01.123Z +12.345s [host:rank/size] INFO  message
// (UTC time, seconds since the process started; "[host]" alone before MPI gives the rank.)
// DTRAIN_LOG(kInfo) << ... logs on every rank; DTRAIN_LOG0(kInfo) << ... on world rank 0 only.
// The level comes from DTRAIN_LOG_LEVEL (debug, info, warn, error; default info).
#include <sstream>
#include <string>
#include <string_view>

namespace dtrain::runtime {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Parses "debug" | "info" | "warn" | "error"; anything else is a UsageError naming `source`.
LogLevel parse_log_level(std::string_view text, std::string_view source);

// The active level: DTRAIN_LOG_LEVEL on first use, or what set_log_level chose.
LogLevel log_level();
void set_log_level(LogLevel level);

// "[host:rank/size]" for the current process identity, "[host]" before it has a rank.
std::string rank_prefix();

// Writes one complete line to stderr with a single write.
void write_log_line(LogLevel level, std::string_view message);

class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine() { write_log_line(level_, text_.str()); }
  template <typename T>
  LogLine& operator<<(const T& value) {
    text_ << value;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream text_;
};

bool log_enabled(LogLevel level);
bool log_enabled_on_rank_zero(LogLevel level);

}  // namespace dtrain::runtime

#define DTRAIN_LOG(level)                                                    \
  if (!::dtrain::runtime::log_enabled(::dtrain::runtime::LogLevel::level)) { \
  } else                                                                     \
    ::dtrain::runtime::LogLine(::dtrain::runtime::LogLevel::level)

#define DTRAIN_LOG0(level)                                                                \
  if (!::dtrain::runtime::log_enabled_on_rank_zero(::dtrain::runtime::LogLevel::level)) { \
  } else                                                                                  \
    ::dtrain::runtime::LogLine(::dtrain::runtime::LogLevel::level)
