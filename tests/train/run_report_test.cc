// The training log: the filtered config.pbtxt (and that --config reads it back), the run
// directory's default name and its errors, and the duration and ETA pieces of the progress line.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "train/checkpoint/run_directory.h"
#include "train/config/config_text.h"
#include "train/config/resolved_config.h"
#include "train/config/train_config.h"
#include "train/observe/progress.h"

namespace dtrain::train {
namespace {

bool has_line(const std::string& text, const std::string& prefix) {
  return text.find("\n" + prefix) != std::string::npos;
}

ResolvedConfig small_resnet_cosine() {
  TrainConfig c = default_train_config();
  c.set_model("small-resnet");
  c.add_blocks_per_stage(1);
  c.set_lr_decay("cosine");
  c.set_backend("mpi-ring");
  c.set_device("cpu");
  return resolve(c);
}

TEST(ConfigText, LeavesOutTheFieldsThatDoNotApply) {
  const std::string text = config_text(small_resnet_cosine(), "header line");
  EXPECT_EQ(text.rfind("# header line\n", 0), 0u) << text;
  EXPECT_FALSE(has_line(text, "depth:")) << "depth is resnet's, not small-resnet's:\n" << text;
  EXPECT_FALSE(has_line(text, "lr_milestones:")) << "milestones are step decay's:\n" << text;
  TrainConfig nccl = default_train_config();
  nccl.set_device("gpu");
  nccl.set_backend("nccl");
  EXPECT_FALSE(has_line(config_text(resolve(nccl), ""), "gradient_wire_dtype:"))
      << "on GPUs the wire format is hierarchical's and mpi-ring's";
  EXPECT_TRUE(has_line(text, "gradient_wire_dtype:")) << "on CPUs every bucket takes the wire format:\n" << text;
  EXPECT_FALSE(has_line(text, "data_dir:")) << "synthetic data has no directory";
  EXPECT_FALSE(has_line(text, "val_resize:")) << "imagenet only";
  EXPECT_FALSE(has_line(text, "precision:")) << "device cpu";
  EXPECT_FALSE(has_line(text, "keep_checkpoints:")) << "no checkpoint_dir";
  EXPECT_FALSE(has_line(text, "run_dir:")) << "the default: where the file lies";
  for (const char* kept : {"model: \"small-resnet\"", "blocks_per_stage: [1]", "width: 64", "lr_decay: \"cosine\"",
                           "nesterov: false", "seed: 42", "\n# Optimization\n"}) {
    EXPECT_NE(text.find(kept), std::string::npos) << kept << " missing:\n" << text;
  }

  TrainConfig resnet = default_train_config();
  resnet.set_dataset("imagenet");
  resnet.set_data_dir("/data/imagenet");
  resnet.set_checkpoint_dir("/ckpt");
  const std::string full = config_text(resolve(resnet), "");
  for (const char* gone : {"blocks_per_stage:", "width:", "bottleneck:", "synthetic_samples:"}) {
    EXPECT_FALSE(has_line(full, gone)) << gone << " is small-resnet's or synthetic's:\n" << full;
  }
  for (const char* kept : {"depth: 50", "lr_milestones: [30, 60, 80]", "gradient_wire_dtype: \"auto\"",
                           "data_dir: \"/data/imagenet\"", "val_resize: 256", "keep_checkpoints: 3"}) {
    EXPECT_NE(full.find(kept), std::string::npos) << kept << " missing:\n" << full;
  }
}

TEST(ConfigText, ReadsBackAsTheSameConfigForTheFieldsItKeeps) {
  const ResolvedConfig r = small_resnet_cosine();
  TrainConfig parsed;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(config_text(r, "a comment"), &parsed));
  EXPECT_EQ(parsed.model(), "small-resnet");
  EXPECT_EQ(parsed.blocks_per_stage_size(), 1);
  EXPECT_EQ(parsed.lr_decay(), "cosine");
  EXPECT_EQ(parsed.seed(), r.fields.seed());
  EXPECT_EQ(parsed.base_lr(), r.fields.base_lr());
  EXPECT_EQ(parsed.depth(), 0) << "left out";
}

TEST(ConfigText, TheSummaryIsOneShortLine) {
  const std::string summary = config_summary(resolve(default_train_config()));
  EXPECT_EQ(summary.find('\n'), std::string::npos);
  EXPECT_LT(summary.size(), 200u) << summary;
  EXPECT_NE(summary.find("resnet-50 on synthetic, batch 32 per rank, 90 epoch(s)"), std::string::npos) << summary;
}

TEST(RunDirectory, DefaultNameIsTheConfigsStemAndTheUtcTime) {
  const auto t = std::chrono::system_clock::from_time_t(1795437601);  // 2026-11-23T12:40:01Z
  EXPECT_EQ(default_run_dir("configs/fashion_mnist_resnet.pbtxt", t), "runs/fashion_mnist_resnet-20261123T124001Z");
  EXPECT_EQ(default_run_dir("", t), "runs/dtrain-20261123T124001Z");
}

TEST(RunDirectory, ResolvedFromRunDirThenCheckpointDir) {
  TrainConfig c = default_train_config();
  EXPECT_EQ(resolve(c).run_dir, "") << "the program chooses the default, not resolve()";
  c.set_checkpoint_dir("/ckpt");
  EXPECT_EQ(resolve(c).run_dir, "/ckpt") << "a requeued job keeps one directory";
  c.set_run_dir("/runs/a");
  EXPECT_EQ(resolve(c).run_dir, "/runs/a");
}

TEST(RunDirectory, AFreshNameIsNeverShared) {
  const std::string base =
      std::filesystem::temp_directory_path() / ("dtrain_run_dir_" + std::to_string(::getpid()) + "/runs/x");
  EXPECT_EQ(prepare_run_dir(base, true), base);
  EXPECT_EQ(prepare_run_dir(base, true), base + "-2");
  EXPECT_EQ(prepare_run_dir(base, false), base) << "a given run_dir is reused";
  std::filesystem::remove_all(std::filesystem::path(base).parent_path().parent_path());
}

TEST(RunDirectory, NotADirectoryIsAUsageErrorNamingIt) {
  const std::string file = std::filesystem::temp_directory_path() / ("dtrain_run_file_" + std::to_string(::getpid()));
  std::ofstream(file) << "x";
  for (const std::string& dir : {file, file + "/below"}) {
    try {
      prepare_run_dir(dir, false);
      ADD_FAILURE() << dir << " accepted";
    } catch (const runtime::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("run_dir " + dir + ": not a writable directory"), std::string::npos)
          << e.what();
    }
  }
  std::filesystem::remove(file);
}

TEST(Progress, DurationsAndEta) {
  EXPECT_EQ(format_duration(0), "0.0s");
  EXPECT_EQ(format_duration(12.34), "12.3s");
  EXPECT_EQ(format_duration(245), "4m05s");
  EXPECT_EQ(format_duration(3723), "1h02m03s");
  EXPECT_EQ(format_duration(std::nan("")), "0.0s");
  EXPECT_EQ(format_gib(1.5 * 1024 * 1024 * 1024), "1.50 GiB");
  EXPECT_DOUBLE_EQ(eta_seconds(10, 20, 60), 30) << "20 steps in 10 s, 60 to go";
  EXPECT_EQ(eta_seconds(10, 0, 60), 0);
  EXPECT_EQ(eta_seconds(10, 20, 0), 0);
}

}  // namespace
}  // namespace dtrain::train
