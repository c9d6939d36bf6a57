// Config mistakes that used to train on defaults (issue 14, items 15 and 19): a directory given as
// --config, a bare argument (a forgotten --config), one field given in both spellings, and a
// negative synthetic_samples. Each is a UsageError naming the offending argument.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/train/train_config.h"

namespace dtrain::train {
namespace {

// The usage error loading these flags gives, or "no error".
std::string usage_error(std::vector<std::string> args) {
  args.insert(args.begin(), "dtrain-train");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  TrainConfig c;
  try {
    load_train_config(static_cast<int>(argv.size()), argv.data(), &c);
  } catch (const core::UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ConfigMistakes, ADirectoryAsConfigIsAnErrorNamingIt) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string message = usage_error({"--config", dir});
  EXPECT_NE(message.find("--config " + dir + ": is a directory, not a config file"), std::string::npos) << message;
}

TEST(ConfigMistakes, ABareArgumentIsAnErrorNamingIt) {
  const std::string message = usage_error({"--epochs", "2", "configs/fashion_mnist_resnet.pbtxt"});
  EXPECT_NE(message.find("dtrain-train: unexpected argument 'configs/fashion_mnist_resnet.pbtxt'"), std::string::npos)
      << message;
  EXPECT_NE(usage_error({"stray", "--epochs", "2"}).find("unexpected argument 'stray'"), std::string::npos);
}

TEST(ConfigMistakes, BothSpellingsOfOneFieldAreAnErrorNamingBoth) {
  for (const auto& args : {std::vector<std::string>{"--batch-per-rank", "4", "--batch_per_rank", "2"},
                           std::vector<std::string>{"--batch_per_rank=2", "--batch-per-rank=4"}}) {
    const std::string message = usage_error(args);
    EXPECT_NE(message.find("--batch-per-rank 4 and --batch_per_rank 2 set the same field batch_per_rank"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(usage_error({"--batch-per-rank", "4", "--max_steps_per_epoch", "3"}), "no error");
}

TEST(ConfigMistakes, NegativeSyntheticSamplesAreAUsageError) {
  EXPECT_NE(usage_error({"--synthetic_samples=-5"}).find("synthetic_samples must be positive, got -5"),
            std::string::npos);
  EXPECT_NE(usage_error({"--synthetic_samples=0"}).find("synthetic_samples must be positive, got 0"), std::string::npos);
  EXPECT_NE(usage_error({"--max_nonfinite_steps=-1"}).find("max_nonfinite_steps must not be negative"),
            std::string::npos);
}

}  // namespace
}  // namespace dtrain::train
