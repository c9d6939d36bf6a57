#include "runtime/base/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "runtime/base/error.h"
#include "runtime/base/process_identity.h"

namespace dtrain::runtime {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_level{kUnset};
// Elapsed time is counted from the program's start (static initialization, before main).
const std::chrono::steady_clock::time_point g_start = std::chrono::steady_clock::now();

// "2026-11-23T12:40:01.123Z +12.345s": UTC wall time (to line up logs of several hosts) and the
// time since this process started (to read durations without arithmetic).
std::string time_prefix() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const long millis =
      static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
  char text[64];
  const size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%03ldZ +%.3fs", millis, elapsed);
  return text;
}

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
  if (id.world_rank < 0) return "[" + id.host + "]";  // before MPI: no rank yet
  return "[" + id.host + ":" + std::to_string(id.world_rank) + "/" + std::to_string(id.world_size) + "]";
}

void write_log_line(LogLevel level, std::string_view message) {
  std::string line = time_prefix();
  line += " ";
  line += rank_prefix();
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

}  // namespace dtrain::runtime
