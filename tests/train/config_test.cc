// TrainConfig loading: defaults, a text-format file, flag overrides, and errors that name the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/train/resolved_config.h"
#include "runtime/train/train_config.h"

namespace dtrain::train {
namespace {

bool load(std::vector<std::string> args, TrainConfig* config) {
  args.insert(args.begin(), "dtrain-train");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ResolvedConfig resolved;
  const bool loaded = load_train_config(static_cast<int>(argv.size()), argv.data(), &resolved);
  *config = resolved.fields;
  return loaded;
}

std::string write_config(const std::string& text) {
  const std::string path =
      std::filesystem::temp_directory_path() / ("dtrain_cfg_" + std::to_string(::getpid()) + ".pbtxt");
  std::ofstream(path) << text;
  return path;
}

TEST(TrainConfig, FileThenFlagsOverride) {
  const std::string path = write_config(
      "model: \"small-resnet\"\nblocks_per_stage: [2, 1]\nbottleneck: false\ndataset: \"synthetic\"\n"
      "batch_per_rank: 16\nlr_milestones: [5]\n");
  TrainConfig c;
  ASSERT_TRUE(load({"--config", path, "--batch_per_rank=8", "--momentum", "0", "--lr_milestones=3,7"}, &c));
  EXPECT_EQ(c.model(), "small-resnet");
  EXPECT_FALSE(c.bottleneck()) << "an explicit false in the file overrides the default true";
  EXPECT_EQ(c.blocks_per_stage_size(), 2) << "repeated fields in the file replace the defaults";
  EXPECT_EQ(c.batch_per_rank(), 8);
  EXPECT_EQ(c.momentum(), 0.0);
  ASSERT_EQ(c.lr_milestones_size(), 2);
  EXPECT_EQ(c.lr_milestones(1), 7);
  EXPECT_EQ(c.epochs(), 90) << "untouched fields keep their defaults";
  std::filesystem::remove(path);
}

// The usage error loading these flags gives, or "no error".
std::string usage_error(std::vector<std::string> args) {
  TrainConfig c;
  try {
    load(std::move(args), &c);
  } catch (const core::UsageError& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

TEST(TrainConfig, ErrorsNameTheFieldFileAndLine) {
  const auto message = usage_error;
  EXPECT_NE(message({"--nonsense=1"}).find("unrecognised option '--nonsense"), std::string::npos);
  EXPECT_NE(message({"--batch_per_rank=many"}).find("--batch_per_rank"), std::string::npos);
  EXPECT_NE(message({"--batch_per_rank=0"}).find("batch_per_rank must be positive"), std::string::npos);
  EXPECT_NE(message({"--lr_decay=linear"}).find("lr_decay 'linear'"), std::string::npos);
  EXPECT_NE(message({"--model=small-resnet", "--dataset=synthetic"}).find("blocks_per_stage"), std::string::npos);
  const std::string path = write_config("model: \"resnet\"\nbatchsize: 3\n");
  const std::string bad = message({"--config", path});
  EXPECT_NE(bad.find(path + ":2:"), std::string::npos) << bad;
  EXPECT_NE(bad.find("batchsize"), std::string::npos) << bad;
  std::filesystem::remove(path);
  EXPECT_NE(message({"--config", "/nonexistent.pbtxt"}).find("cannot open"), std::string::npos);
}

TEST(TrainConfig, ShippedConfigsLoad) {
  for (const char* name : {"fashion_mnist_resnet.pbtxt", "resnet50_synthetic.pbtxt", "resnet50_imagenet.pbtxt"}) {
    TrainConfig c;
    EXPECT_TRUE(load({"--config", std::string(DTRAIN_SOURCE_DIR) + "/configs/" + name}, &c)) << name;
  }
  TrainConfig imagenet;
  ASSERT_TRUE(load({"--config", std::string(DTRAIN_SOURCE_DIR) + "/configs/resnet50_imagenet.pbtxt"}, &imagenet));
  EXPECT_EQ(imagenet.dataset(), "imagenet");
  EXPECT_EQ(imagenet.lr_milestones_size(), 3);
  EXPECT_DOUBLE_EQ(imagenet.max_bad_fraction(), 0.001);
}

TEST(TrainConfig, ImageFolderFieldsAreChecked) {
  const auto message = usage_error;
  EXPECT_NE(message({"--dataset=imagenet"}).find("dataset imagenet needs data_dir"), std::string::npos);
  EXPECT_NE(message({"--dataset=imagenet", "--data_dir=/x", "--image_size=300"}).find("val_resize 256 is smaller"),
            std::string::npos);
  EXPECT_NE(message({"--max_bad_fraction=2"}).find("max_bad_fraction 2 outside"), std::string::npos);
}

}  // namespace
}  // namespace dtrain::train
