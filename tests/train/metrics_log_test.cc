#include "runtime/train/metrics_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/core/error.h"

namespace dtrain::train {
namespace {

TEST(MetricsLog, WritesOneJsonObjectPerLineAndAppends) {
  const std::string path = std::filesystem::temp_directory_path() / ("dtrain_metrics_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  {
    MetricsLog log(path);
    log.write("train", {{"epoch", 0}, {"step", 20}, {"loss", 1.25}, {"lr", 0.1}});
  }
  {
    MetricsLog log(path);
    log.write("eval", {{"epoch", 0}, {"test_top1", 0.875}, {"bad", std::nan("")}});
  }
  std::ifstream in(path);
  std::string first, second, third;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_FALSE(std::getline(in, third));
  EXPECT_EQ(first, R"({"event": "train", "epoch": 0, "step": 20, "loss": 1.25, "lr": 0.1})");
  EXPECT_EQ(second, R"({"event": "eval", "epoch": 0, "test_top1": 0.875, "bad": null})");
  std::filesystem::remove(path);
  EXPECT_THROW(MetricsLog("/nonexistent/dir/metrics.jsonl"), core::UsageError);
  MetricsLog none("");
  none.write("train", {{"epoch", 1}});  // no file: nothing happens
}

}  // namespace
}  // namespace dtrain::train
