#pragma once
// The JSON-lines metrics file of a run (--metrics_file), written by rank 0 only: one object per
// line, each line written whole and flushed, so a reader (or a crash) never sees half a record.
// The file is appended to (a requeued job continues its run's file); each run starts with a "run"
// record (the Trainer writes it: version, run id, start time, world size, hosts, config), the
// separator that tells one run's records from the next. Every record carries
//   {"event": ..., "time": "2026-11-23T12:40:01.123Z", "elapsed_seconds": 12.345, ...}
// (UTC wall time, seconds since the program started, as the log prefix gives them).
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::train {

// `t` as ISO 8601 UTC with milliseconds: 2026-11-23T12:40:01.123Z.
std::string utc_time(std::chrono::system_clock::time_point t);

class MetricsLog {
 public:
  // Empty path: a no-op log. UsageError naming the path if it cannot be opened.
  explicit MetricsLog(const std::string& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // {"event": event, "time": ..., "elapsed_seconds": ..., name: value, ...}; integral values print
  // without a fraction, non-finite ones as null.
  void write(const std::string& event, const std::vector<std::pair<std::string, double>>& fields);
  // The same with values that are JSON already (strings, arrays, objects; core/json.h).
  void write_json(const std::string& event, const std::vector<std::pair<std::string, std::string>>& fields);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  bool broken_ = false;  // a write failed (a full disk): warned once, nothing more is written
};

}  // namespace dtrain::train
