#pragma once
// The JSON-lines metrics file of a run (--metrics_file), written by rank 0 only: one object per
// line, each line written whole and flushed, so a reader (or a crash) never sees half a record.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::train {

class MetricsLog {
 public:
  // Empty path: a no-op log. UsageError naming the path if it cannot be opened.
  explicit MetricsLog(const std::string& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // {"event": event, name: value, ...}; integral values print without a fraction.
  void write(const std::string& event, const std::vector<std::pair<std::string, double>>& fields);

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace dtrain::train
