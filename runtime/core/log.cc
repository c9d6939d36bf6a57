#include "runtime/core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "runtime/core/error.h"
#include "runtime/core/process_identity.h"

namespace dtrain::core {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_level{kUnset};

const char* level_tag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO ";
    case LogLevel::kWarn: return "WARN ";
    case LogLevel::kError: return "ERROR";
  }
  return "?";
}

}  // namespace

LogLevel parse_log_level(std::string_view text, std::string_view source) {
  if (text == "debug") return LogLevel::kDebug;
  if (text == "info") return LogLevel::kInfo;
  if (text == "warn" || text == "warning") return LogLevel::kWarn;
  if (text == "error") return LogLevel::kError;
  DTRAIN_USAGE_FAIL() << source << "='" << text << "' is not a log level (use debug, info, warn or error)";
}

LogLevel log_level() {
  int level = g_level.load(std::memory_order_relaxed);
  if (level == kUnset) {
    const char* env = std::getenv("DTRAIN_LOG_LEVEL");
    level =
        static_cast<int>(env == nullptr || *env == '\0' ? LogLevel::kInfo : parse_log_level(env, "DTRAIN_LOG_LEVEL"));
    g_level.store(level, std::memory_order_relaxed);
  }
  return static_cast<LogLevel>(level);
}

void set_log_level(LogLevel level) {
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

std::string rank_prefix() {
  const ProcessIdentity& id = process_identity();
  std::string prefix = "[" + id.host + ":";
  prefix += id.world_rank >= 0 ? std::to_string(id.world_rank) : "?";
  prefix += "/";
  prefix += id.world_size >= 0 ? std::to_string(id.world_size) : "?";
  prefix += "]";
  return prefix;
}

void write_log_line(LogLevel level, std::string_view message) {
  std::string line = rank_prefix();
  line += " ";
  line += level_tag(level);
  line += " ";
  line += message;
  line += "\n";
  // One write() keeps the line whole even when several ranks share the terminal.
  const char* data = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t written = ::write(STDERR_FILENO, data, left);
    if (written <= 0) break;
    data += written;
    left -= static_cast<size_t>(written);
  }
}

bool log_enabled(LogLevel level) {
  return level >= log_level();
}

bool log_enabled_on_rank_zero(LogLevel level) {
  return is_world_rank_zero() && log_enabled(level);
}

}  // namespace dtrain::core
