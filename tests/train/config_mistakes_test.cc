// Config mistakes that used to train on defaults: a directory given as
// --config, a bare argument (a forgotten --config), a prefix of a flag, no arguments at all, and a
// negative synthetic_samples. Each is a UsageError naming the offending argument.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "train/config/config_limits.h"
#include "train/config/resolved_config.h"
#include "train/config/train_config.h"

namespace dtrain::train {
namespace {

// The usage error loading these flags gives, or "no error".
std::string usage_error(std::vector<std::string> args) {
  args.insert(args.begin(), "dtrain-train");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ResolvedConfig c;
  try {
    load_train_config(static_cast<int>(argv.size()), argv.data(), &c);
  } catch (const runtime::UsageError& e) {
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

// Boost's prefix guessing made --epoch mean --epochs; a misspelt flag must be an error.
TEST(ConfigMistakes, APrefixOfAFlagIsAnUnknownFlag) {
  EXPECT_NE(usage_error({"--epoch", "3"}).find("unrecognised option '--epoch'"), std::string::npos)
      << usage_error({"--epoch", "3"});
  EXPECT_NE(usage_error({"--batch", "3"}).find("unrecognised option '--batch'"), std::string::npos);
}

// No arguments at all would train the defaults (90 epochs of synthetic ResNet-50).
TEST(ConfigMistakes, NoArgumentsAtAllIsAnErrorSayingWhatToGive) {
  std::string program = "dtrain-train";
  char* argv[] = {program.data()};
  ResolvedConfig c;
  try {
    load_train_config(1, argv, &c);
    FAIL() << "no error";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing to train. Give a config"), std::string::npos) << e.what();
  }
}

TEST(ConfigMistakes, NegativeSyntheticSamplesAreAUsageError) {
  EXPECT_NE(usage_error({"--synthetic_samples=-5"}).find("synthetic_samples must be positive, got -5"),
            std::string::npos);
  EXPECT_NE(usage_error({"--synthetic_samples=0"}).find("synthetic_samples must be positive, got 0"),
            std::string::npos);
  EXPECT_NE(usage_error({"--max_nonfinite_steps=-1"}).find("max_nonfinite_steps must not be negative"),
            std::string::npos);
}

// Absurd sizes and non-finite numbers are one usage error naming the field,
// before anything is allocated (they died in bad_alloc, a length error, EAGAIN or the OOM killer,
// or, for --base_lr inf, trained on).
TEST(ConfigMistakes, AbsurdSizesNameTheirFieldBeforeAllocating) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--batch_per_rank=2147483647"},
       "batch_per_rank 2147483647 of image_size 224 with prefetch_batches 4: the "
       "loader's batches alone need"},
      {{"--image_size=1000000"}, "image_size 1000000 is over the largest image side"},
      {{"--dataset=imagenet", "--data_dir=/x", "--val_resize=2000000000"}, "val_resize 2000000000 is over"},
      {{"--prefetch_batches=2147483647"}, "prefetch_batches 2147483647 is over 1024 batches"},
      {{"--loader_threads=1000000"}, "loader_threads 1000000 is over 1024 threads per rank"},
      {{"--bucket_mib=2147483647"}, "bucket_mib 2147483647 is over"},
      {{"--max_file_mib=2147483647"}, "max_file_mib 2147483647 is over"},
      {{"--accumulation_steps=2147483647"}, "accumulation_steps 2147483647 is over 65536 micro-batches"},
      {{"--accumulation_steps=0"}, "accumulation_steps must be at least 1 (1: no gradient accumulation), got 0"},
  };
  for (const auto& [args, expected] : cases) {
    const std::string message = usage_error(args);
    EXPECT_NE(message.find(expected), std::string::npos) << args.front() << ": " << message;
  }
}

TEST(ConfigMistakes, NonFiniteNumbersAreRefusedNamingTheField) {
  // Fields without a range of their own (these were accepted), then ones whose range check already
  // refused them, which keep their own message.
  for (const char* field : {"base_lr", "momentum", "weight_decay", "warmup_epochs"}) {
    for (const char* value : {"inf", "-inf", "nan"}) {
      const std::string message = usage_error({std::string("--") + field + "=" + value});
      EXPECT_NE(message.find(std::string(field) + " " + value + " is not a finite number"), std::string::npos)
          << field << "=" << value << ": " << message;
    }
  }
  for (const char* field : {"label_smoothing", "max_image_megapixels", "max_bad_fraction", "stall_warning_seconds"}) {
    for (const char* value : {"inf", "-inf", "nan"}) {
      const std::string message = usage_error({std::string("--") + field + "=" + value});
      EXPECT_NE(message.find(std::string(field) + " "), std::string::npos) << field << "=" << value << ": " << message;
    }
  }
}

TEST(ConfigMistakes, NegativeCountsAreRefusedNamingTheField) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--depth=-50"}, "depth -50 must not be negative"},
      {{"--width=-4"}, "width -4 must not be negative"},
      {{"--log_every_steps=-1"}, "log_every_steps -1 must not be negative"},
      {{"--lr_milestones=30,-60"}, "lr_milestones (item 2) -60 must not be negative"},
      {{"--model=small-resnet", "--blocks_per_stage=1,-1"}, "blocks_per_stage (item 2) -1 must not be negative"},
      {{"--loader_threads=-2"}, "loader_threads -2 must be positive, or 0"},
  };
  for (const auto& [args, expected] : cases) {
    const std::string message = usage_error(args);
    EXPECT_NE(message.find(expected), std::string::npos) << args.front() << ": " << message;
  }
}

// --jpeg_decoder: an unknown decoder, or gpu where nothing would use it (no JPEGs; the CPU steps),
// names itself instead of being ignored.
TEST(ConfigMistakes, JpegDecoderGpuOnlyWhereItDecodesSomething) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--jpeg_decoder=nvjpeg"}, "jpeg_decoder 'nvjpeg'"},
      {{"--jpeg_decoder=gpu"}, "jpeg_decoder gpu decodes imagenet's JPEGs on the GPU; this run has dataset synthetic"},
      {{"--jpeg_decoder=gpu", "--dataset=imagenet", "--data_dir=/x", "--device=cpu"},
       "jpeg_decoder gpu decodes imagenet's JPEGs on the GPU; this run has dataset imagenet and device cpu"},
  };
  for (const auto& [args, expected] : cases) {
    const std::string message = usage_error(args);
    EXPECT_NE(message.find(expected), std::string::npos) << args.front() << ": " << message;
  }
}

TEST(ConfigMistakes, TheLoadersBuffersMustFitInTheHostsMemory) {
  TrainConfig c = default_train_config();
  c.set_batch_per_rank(256);
  c.set_image_size(224);
  c.set_prefetch_batches(4);  // 6 x 256 x 224 x 224 x 3 bytes = 220.5 MiB
  EXPECT_NO_THROW(validate_limits(c, uint64_t{1} << 30));
  try {
    validate_limits(c, uint64_t{128} << 20);
    FAIL() << "no error";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("need 220.5 MiB, more than this host's 128.0 MiB of memory"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dtrain::train
