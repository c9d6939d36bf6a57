#include "runtime/train/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "runtime/core/error.h"

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
  std::string line = "{\"event\": \"" + event + "\"";
  char number[64];
  for (const auto& [name, value] : fields) {
    if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
      std::snprintf(number, sizeof(number), "%.0f", value);
    } else if (std::isfinite(value)) {
      std::snprintf(number, sizeof(number), "%.9g", value);
    } else {
      std::snprintf(number, sizeof(number), "null");
    }
    line += ", \"" + name + "\": " + number;
  }
  line += "}\n";
  DTRAIN_CHECK(std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0)
      << "writing the metrics file: " << std::strerror(errno);
}

}  // namespace dtrain::train
