// TrainConfig loading: defaults, a text-format file, flag overrides, and errors that name the field.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/base/cli.h"
#include "runtime/base/error.h"
#include "train/config/config_help.h"
#include "train/config/resolved_config.h"
#include "train/config/resume_changes.h"
#include "train/config/train_config.h"

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
  } catch (const runtime::UsageError& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

TEST(TrainConfig, ErrorsNameTheFieldFileAndLine) {
  const auto message = usage_error;
  EXPECT_NE(message({"--nonsense=1"}).find("unrecognised option '--nonsense"), std::string::npos);
  EXPECT_NE(message({"--batch_per_rank=many"}).find("--batch-per-rank=many"), std::string::npos);
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

// gradient_wire_dtype: auto by default (decided with the layout, comm::choose_wire), the explicit
// formats kept; a checkpoint written under the old fp32 default resumes under auto (a free field).
TEST(TrainConfig, WireDtypeIsAutoByDefaultAndFreeOnResume) {
  TrainConfig c = default_train_config();
  EXPECT_EQ(c.gradient_wire_dtype(), "auto");
  EXPECT_EQ(resolve(c).gradient_wire_dtype, std::nullopt);
  c.set_gradient_wire_dtype("fp32");
  EXPECT_EQ(resolve(c).gradient_wire_dtype, runtime::DType::kF32);
  c.set_gradient_wire_dtype("bf16");
  EXPECT_EQ(resolve(c).gradient_wire_dtype, runtime::DType::kBF16);
  EXPECT_NE(
      usage_error({"--gradient-wire-dtype=int8"}).find("gradient_wire_dtype 'int8': use auto, fp32, bf16 or fp16"),
      std::string::npos);
  TrainConfig saved = default_train_config();
  saved.set_gradient_wire_dtype("fp32");
  EXPECT_TRUE(check_resume_config(saved, default_train_config(), "ckpt-1").empty());
}

// Flags as argparse and torchrun users expect.
TEST(TrainConfig, TheLastOfARepeatedFlagWinsInEitherSpelling) {
  TrainConfig c;
  ASSERT_TRUE(load({"--batch-per-rank", "4", "--batch_per_rank", "2"}, &c));
  EXPECT_EQ(c.batch_per_rank(), 2);
  ASSERT_TRUE(load({"--batch_per_rank=2", "--batch-per-rank=4", "--epochs=3", "--epochs", "5"}, &c));
  EXPECT_EQ(c.batch_per_rank(), 4);
  EXPECT_EQ(c.epochs(), 5);
  ASSERT_TRUE(load({"--lr-milestones=1,2", "--lr_milestones=7"}, &c));
  ASSERT_EQ(c.lr_milestones_size(), 1);
  EXPECT_EQ(c.lr_milestones(0), 7);
}

TEST(TrainConfig, ASwitchWorksBareOrWithAValue) {
  TrainConfig c;
  ASSERT_TRUE(load({"--nesterov", "--epochs", "2"}, &c));
  EXPECT_TRUE(c.nesterov());
  EXPECT_EQ(c.epochs(), 2);
  ASSERT_TRUE(load({"--nesterov", "--nesterov=false"}, &c));
  EXPECT_FALSE(c.nesterov());
  ASSERT_TRUE(load({"--no-tf32", "false", "--nesterov", "true", "--zero_init_residual", "yes"}, &c));
  EXPECT_FALSE(c.no_tf32());
  EXPECT_TRUE(c.nesterov());
  EXPECT_TRUE(c.zero_init_residual());
  ASSERT_TRUE(load({"--no-tf32"}, &c));
  EXPECT_TRUE(c.no_tf32());
}

// --help lists every field once, under its hyphenated flag, with the description from its comment
// in train_config.proto and a section.
TEST(TrainConfig, HelpDescribesEveryFieldOnce) {
  const std::string help = train_help();
  const google::protobuf::Descriptor* d = TrainConfig::descriptor();
  for (int f = 0; f < d->field_count(); ++f) {
    const google::protobuf::FieldDescriptor* field = d->field(f);
    EXPECT_GE(field_description(field).size(), 10u) << field->name() << " has no comment in train_config.proto";
    EXPECT_NE(field_section(field), "Other") << field->name() << ": number " << field->number() << " is in no section";
    const std::string flag = "  " + runtime::flag_name(field->name()) + " ";
    const size_t first = help.find(flag);
    ASSERT_NE(first, std::string::npos) << flag << " missing from --help";
    EXPECT_EQ(help.find(flag, first + 1), std::string::npos) << flag << " listed twice";
    const size_t line_end = help.find('\n', first);
    EXPECT_NE(help.substr(first, line_end - first).find(field_summary(field)), std::string::npos)
        << flag << " line lacks its description";
  }
  for (size_t at = help.find("--"); at != std::string::npos; at = help.find("--", at + 2)) {
    const size_t end = help.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-", at + 2);
    const std::string flag = help.substr(at, end - at);
    EXPECT_EQ(flag.find('_'), std::string::npos) << flag << " in --help: flags are hyphenated";
  }
}

}  // namespace
}  // namespace dtrain::train
