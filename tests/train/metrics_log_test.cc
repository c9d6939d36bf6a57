#include "train/observe/metrics_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "runtime/base/error.h"

namespace dtrain::train {
namespace {

// Strips the "time" and "elapsed_seconds" every record carries (checked on their own below).
std::string without_time(const std::string& line) {
  const std::regex time(R"(, "time": "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z", )"
                        R"("elapsed_seconds": [0-9]+\.[0-9]{3})");
  return std::regex_replace(line, time, "");
}

TEST(MetricsLog, WritesOneJsonObjectPerLineAndAppends) {
  const std::string path = std::filesystem::temp_directory_path() / ("dtrain_metrics_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  {
    MetricsLog log(path);
    log.write_json("run", {{"run_id", "\"abc\""}, {"hosts", "[\"a\", \"b\"]"}});
    log.write("train", {{"epoch", 0}, {"step", 20}, {"loss", 1.25}, {"lr", 0.1}});
  }
  {
    MetricsLog log(path);  // a second run (a requeued job) appends after the first
    log.write_json("run", {{"run_id", "\"def\""}});
    log.write("validation", {{"epoch", 0}, {"top1", 0.875}, {"bad", std::nan("")}});
  }
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(without_time(lines[0]), R"({"event": "run", "run_id": "abc", "hosts": ["a", "b"]})") << lines[0];
  EXPECT_EQ(without_time(lines[1]), R"({"event": "train", "epoch": 0, "step": 20, "loss": 1.25, "lr": 0.1})")
      << lines[1];
  EXPECT_EQ(without_time(lines[2]), R"({"event": "run", "run_id": "def"})") << lines[2];
  EXPECT_EQ(without_time(lines[3]), R"({"event": "validation", "epoch": 0, "top1": 0.875, "bad": null})") << lines[3];
  std::filesystem::remove(path);
  EXPECT_THROW(MetricsLog("/nonexistent/dir/metrics.jsonl"), runtime::UsageError);
  MetricsLog none("");
  none.write("train", {{"epoch", 1}});  // no file: nothing happens
}

TEST(MetricsLog, TimesAreUtcWithMilliseconds) {
  // 2026-11-23T12:40:01.123Z
  const auto t = std::chrono::system_clock::from_time_t(1795437601) + std::chrono::milliseconds(123);
  EXPECT_EQ(utc_time(t), "2026-11-23T12:40:01.123Z");
}

}  // namespace
}  // namespace dtrain::train
