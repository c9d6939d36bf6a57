#include "train/observe/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/io/json.h"

namespace dtrain::train {
namespace {

// Static initialization, before main, as the log prefix's origin: the two elapsed times agree.
const std::chrono::steady_clock::time_point g_program_start = std::chrono::steady_clock::now();

}  // namespace

std::string utc_time(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  const long millis =
      static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[48];
  const size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%03ldZ", millis);
  return text;
}

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "a");
  DTRAIN_USAGE_CHECK(file_ != nullptr) << "metrics_file " << path << ": " << std::strerror(errno);
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::write(const std::string& event, const std::vector<std::pair<std::string, double>>& fields) {
  if (file_ == nullptr) return;
  std::vector<std::pair<std::string, std::string>> json;
  for (const auto& [name, value] : fields) {
    const bool integral = std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15;
    json.emplace_back(name, integral ? std::to_string(static_cast<int64_t>(value)) : runtime::json_number(value));
  }
  write_json(event, json);
}

void MetricsLog::write_json(const std::string& event, const std::vector<std::pair<std::string, std::string>>& fields) {
  if (file_ == nullptr || broken_) return;
  runtime::JsonObject record;
  record.text("event", event);
  record.text("time", utc_time(std::chrono::system_clock::now()));
  record.number("elapsed_seconds",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - g_program_start).count(), "%.3f");
  for (const auto& [name, json] : fields) record.raw(name, json);
  const std::string line = record.str() + "\n";
  // A side output never costs the training: a full disk stops the records, not the run.
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    broken_ = true;
    DTRAIN_LOG(kWarn) << "metrics file " << path_ << ": cannot write (" << std::strerror(errno)
                      << "); no more records go to it, training goes on";
  }
}

}  // namespace dtrain::train
