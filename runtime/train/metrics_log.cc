#include "runtime/train/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "runtime/core/error.h"
#include "runtime/core/json.h"

namespace dtrain::train {

MetricsLog::MetricsLog(const std::string& path) {
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "a");
  DTRAIN_USAGE_CHECK(file_ != nullptr) << "metrics_file " << path << ": " << std::strerror(errno);
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::write(const std::string& event, const std::vector<std::pair<std::string, double>>& fields) {
  if (file_ == nullptr) return;
  core::JsonObject record;
  record.text("event", event);
  for (const auto& [name, value] : fields) {
    if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
      record.integer(name, static_cast<int64_t>(value));
    } else {
      record.number(name, value);
    }
  }
  const std::string line = record.str() + "\n";
  DTRAIN_CHECK(std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0)
      << "writing the metrics file: " << std::strerror(errno);
}

}  // namespace dtrain::train
