// Resume: train k steps with a checkpoint, stop, resume from "latest" and train to 2k. The
// parameters must be identical to an uninterrupted 2k-step run (the whole pipeline is
// deterministic: data order and augmentation from the seed, fixed reduction order).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/rank/rank_context.h"
#include "tests/support/mpi_world.h"
#include "tests/train/tiny_config.h"
#include "train/trainer.h"

namespace dtrain::train {
namespace {

TrainConfig small_config(long total_steps) {
  TrainConfig c = tiny_synthetic_config();
  c.set_width(4);
  c.set_synthetic_samples(400);
  c.set_batch_per_rank(4);
  c.set_epochs(10);
  c.set_max_steps_per_epoch(3);  // so the checkpoint at step 4 sits inside epoch 1
  c.set_warmup_epochs(1);
  c.set_max_total_steps(total_steps);
  return c;
}

std::vector<float> train_and_get_params(const TrainConfig& config) {
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  Trainer trainer(resolve(config), world);
  trainer.run();
  models::ParameterSet& p = trainer.parameters();
  return std::vector<float>(p.params_flat(), p.params_flat() + p.flat_size());
}

TEST(Resume, CheckpointThenResumeEqualsAnUninterruptedRun) {
  std::string dir = std::filesystem::temp_directory_path() / ("dtrain_resume_" + std::to_string(::getpid()));
  // Every rank must use rank 0's directory name.
  std::vector<char> name(dir.begin(), dir.end());
  name.resize(256, '\0');
  MPI_Bcast(name.data(), 256, MPI_CHAR, 0, MPI_COMM_WORLD);
  dir = name.data();

  const std::vector<float> uninterrupted = train_and_get_params(small_config(8));

  TrainConfig first = small_config(4);
  first.set_checkpoint_dir(dir);
  first.set_checkpoint_every_steps(4);
  train_and_get_params(first);

  TrainConfig second = small_config(8);
  second.set_checkpoint_dir(dir);
  second.set_resume("latest");
  const std::vector<float> resumed = train_and_get_params(second);

  ASSERT_EQ(resumed.size(), uninterrupted.size());
  size_t differ = 0;
  for (size_t i = 0; i < resumed.size(); ++i) differ += resumed[i] != uninterrupted[i];
  EXPECT_EQ(differ, 0u) << "parameters after resume differ from the uninterrupted run";
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::world_rank() == 0) std::filesystem::remove_all(dir);
}

// A resume on another world size or batch. Progress is counted in images: the
// rest of the epoch is dealt over the new ranks (ShardedSampler.AResumeOnAnotherGeometry... shows
// that every entry is then seen once) and the lr is the linear rule's for the new global batch at
// the share of the epoch seen. Runs on sub-communicators of 1 and 2 ranks (other ranks idle).
class ResumeOnAnotherGeometry : public testing::Test {
 protected:
  void SetUp() override {
    if (test::world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks to change the world size";
    std::string name = std::filesystem::temp_directory_path() / ("dtrain_regeom_" + std::to_string(::getpid()));
    std::vector<char> bytes(name.begin(), name.end());
    bytes.resize(256, '\0');
    MPI_Bcast(bytes.data(), 256, MPI_CHAR, 0, MPI_COMM_WORLD);
    dir_ = bytes.data();
    MPI_Comm_split(MPI_COMM_WORLD, test::world_rank() < 2 ? 0 : MPI_UNDEFINED, test::world_rank(), &two_);
    MPI_Comm_split(MPI_COMM_WORLD, test::world_rank() == 0 ? 0 : MPI_UNDEFINED, 0, &one_);
  }
  void TearDown() override {
    if (two_ != MPI_COMM_NULL) MPI_Comm_free(&two_);
    if (one_ != MPI_COMM_NULL) MPI_Comm_free(&one_);
    MPI_Barrier(MPI_COMM_WORLD);
    if (test::world_rank() == 0 && !dir_.empty()) std::filesystem::remove_all(dir_);
  }
  TrainConfig config(int samples, int batch, long total_steps, const std::string& metrics) const {
    TrainConfig c = tiny_synthetic_config();
    c.set_width(4);
    c.set_synthetic_samples(samples);
    c.set_batch_per_rank(batch);
    c.set_epochs(1);
    c.set_warmup_epochs(1);  // the lr grows with the share of the epoch seen
    c.set_base_lr(0.256);
    c.set_checkpoint_dir(dir_);
    c.set_max_total_steps(total_steps);
    c.set_log_every_steps(1);
    c.set_metrics_file(metrics);
    return c;
  }
  static void train(const TrainConfig& c, MPI_Comm comm) {
    if (comm == MPI_COMM_NULL) return;
    const runtime::RankContext ctx(comm, runtime::NodeLayout{});
    Trainer trainer(resolve(c), ctx);
    trainer.run();
  }
  // (step, lr) of every "train" event of a metrics file.
  static std::vector<std::pair<long, double>> logged_lrs(const std::string& path) {
    std::vector<std::pair<long, double>> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"event\": \"train\"") == std::string::npos) continue;
      const auto number_after = [&](const std::string& key) {
        return std::stod(line.substr(line.find("\"" + key + "\": ") + key.size() + 4));
      };
      out.emplace_back(static_cast<long>(number_after("step")), number_after("lr"));
    }
    return out;
  }
  std::string dir_;
  MPI_Comm two_ = MPI_COMM_NULL;
  MPI_Comm one_ = MPI_COMM_NULL;
};

TEST_F(ResumeOnAnotherGeometry, TwoRanksToOneTakesTheRestOfTheEpochAtTheLrOfImagesSeen) {
  // 2 ranks x 4 (global 8) stop at step 3 of 8: 24 of 64 images seen.
  TrainConfig first = config(64, 4, 3, "");
  first.set_checkpoint_every_steps(3);
  train(first, two_);
  // 1 rank x 5 (global 5): the other 40 images in 8 steps, steps 4 to 11 of its 12.
  const std::string metrics = dir_ + "/metrics.jsonl";
  TrainConfig second = config(64, 5, 100, metrics);
  second.set_resume("latest");
  train(second, one_);
  if (test::world_rank() != 0) return;
  const auto lrs = logged_lrs(metrics);
  ASSERT_EQ(lrs.size(), 8u) << "the rest of the epoch: 40 images in steps of 5";
  const double peak = 0.256 * 5 / 256;  // the linear rule for the new global batch
  for (size_t k = 0; k < lrs.size(); ++k) {
    EXPECT_EQ(lrs[k].first, static_cast<long>(3 + k + 1)) << "steps go on from the checkpoint's";
    const double expected = peak * (24.0 + 5.0 * static_cast<double>(k)) / 64.0;  // warm-up by images seen
    EXPECT_NEAR(lrs[k].second, expected, 1e-8 * expected) << "step " << k;        // the file keeps 9 digits
  }
}

TEST_F(ResumeOnAnotherGeometry, OneRankToTwoTakesTheRestOfTheEpochAtTheLrOfImagesSeen) {
  // 1 rank x 3 (global 3) stops at step 7 of 20: 21 of 61 images seen.
  TrainConfig first = config(61, 3, 7, "");
  first.set_checkpoint_every_steps(7);
  train(first, one_);
  MPI_Barrier(MPI_COMM_WORLD);
  // 2 ranks x 2 (global 4): the other 40 in 10 steps.
  const std::string metrics = dir_ + "/metrics.jsonl";
  TrainConfig second = config(61, 2, 100, metrics);
  second.set_resume("latest");
  train(second, two_);
  if (test::world_rank() != 0) return;
  const auto lrs = logged_lrs(metrics);
  ASSERT_EQ(lrs.size(), 10u);
  const double peak = 0.256 * 4 / 256;
  for (size_t k = 0; k < lrs.size(); ++k) {
    const double expected = peak * (21.0 + 4.0 * static_cast<double>(k)) / 61.0;
    EXPECT_NEAR(lrs[k].second, expected, 1e-8 * expected) << "step " << k;
  }
}

TEST_F(ResumeOnAnotherGeometry, AChangedModelFieldIsAnErrorNamingItUnlessAccepted) {
  TrainConfig first = config(64, 4, 2, "");
  first.set_checkpoint_every_steps(2);
  train(first, one_);
  if (one_ == MPI_COMM_NULL) return;
  TrainConfig wider = config(64, 4, 4, "");
  wider.set_width(8);
  wider.set_resume("latest");
  try {
    train(wider, one_);
    ADD_FAILURE() << "a changed width was accepted";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("was written with width 4, this run has 8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--resume_allow_changes width"), std::string::npos) << e.what();
  }
  TrainConfig other_lr = config(64, 4, 4, "");
  other_lr.set_base_lr(0.128);
  other_lr.set_resume("latest");
  EXPECT_THROW(train(other_lr, one_), runtime::UsageError);
  other_lr.set_resume_allow_changes("base_lr");
  EXPECT_NO_THROW(train(other_lr, one_));
  other_lr.set_resume_allow_changes("base_lr,no_such_field");
  try {
    train(other_lr, one_);
    ADD_FAILURE() << "an unknown field was accepted";
  } catch (const runtime::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'no_such_field' is not a TrainConfig field"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dtrain::train
