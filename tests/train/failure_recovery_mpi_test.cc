// Runs that never lie and never lose work, on the CPU path:
// - a non-finite loss stops the run with an error naming the step, after max_nonfinite_steps
//   tolerated checks in a row, and a diverged model is never written as a checkpoint;
// - max_total_steps stopping a run mid-epoch writes a final checkpoint, and resuming from it
//   equals an uninterrupted run;
// - a new run in an old run's checkpoint directory keeps its own checkpoints and leaves the old
//   run's alone; a resume from an older checkpoint branches off under a new run id.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/rank/rank_context.h"
#include "tests/support/mpi_world.h"
#include "tests/train/tiny_config.h"
#include "train/checkpoint/checkpoint.h"
#include "train/trainer.h"

namespace dtrain::train {
namespace {

namespace fs = std::filesystem;

// 3 steps per epoch, so step 4 or 5 sits inside epoch 1.
TrainConfig small_config(long total_steps) {
  TrainConfig c = tiny_synthetic_config();
  c.set_width(4);
  c.set_synthetic_samples(400);
  c.set_batch_per_rank(4);
  c.set_epochs(10);
  c.set_max_steps_per_epoch(3);
  c.set_warmup_epochs(1);
  c.set_max_total_steps(total_steps);
  return c;
}

std::vector<float> train(const TrainConfig& config, MPI_Comm comm = MPI_COMM_WORLD) {
  const runtime::RankContext world(comm, runtime::NodeLayout{});
  Trainer trainer(resolve(config), world);
  trainer.run();
  models::ParameterSet& p = trainer.parameters();
  return std::vector<float>(p.params_flat(), p.params_flat() + p.flat_size());
}

// Rank 0's fresh directory name on every rank; removed by the caller through rank 0.
std::string shared_dir(const std::string& tag) {
  std::string dir = fs::temp_directory_path() / ("dtrain_" + tag + "_" + std::to_string(::getpid()));
  std::vector<char> name(dir.begin(), dir.end());
  name.resize(256, '\0');
  MPI_Bcast(name.data(), 256, MPI_CHAR, 0, MPI_COMM_WORLD);
  dir = name.data();
  if (test::world_rank() == 0) fs::remove_all(dir);
  return dir;
}

void remove_shared_dir(const std::string& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::world_rank() == 0) fs::remove_all(dir);
}

// The error a run ends with (each rank trains alone, so every rank sees it), or "no error".
std::string error_of(const TrainConfig& config) {
  try {
    train(config, MPI_COMM_SELF);
  } catch (const runtime::UsageError& e) {
    return std::string("usage error: ") + e.what();
  } catch (const runtime::Error& e) {
    return e.what();
  }
  return "no error";
}

// The global step an error message names ("... at step N ..."), or -1.
long step_named(const std::string& message) {
  const size_t at = message.find(" at step ");
  return at == std::string::npos ? -1 : std::stol(message.substr(at + 9));
}

TrainConfig diverging_config() {
  TrainConfig c = small_config(0);
  c.set_warmup_epochs(0);
  c.set_base_lr(1e30);  // the first update sends the weights past fp32's range
  c.set_epochs(3);
  // Epochs long enough that the tolerated bad steps end inside one (a non-finite validation loss
  // at an epoch's end fails the run too).
  c.set_max_steps_per_epoch(20);
  // The NaN path itself: the growth check (divergence_guard_test.cc) would stop the run first.
  c.set_divergence_factor(0);
  return c;
}

TEST(DivergenceGuard, NonFiniteLossStopsTheRunNamingTheStep) {
  const std::string first = error_of(diverging_config());
  EXPECT_NE(first.find("training diverged: non-finite loss at step "), std::string::npos) << first;
  EXPECT_NE(first.find("1 check(s) in a row, more than max_nonfinite_steps 0"), std::string::npos) << first;
  const long step = step_named(first);
  EXPECT_GE(step, 1) << first;
  EXPECT_LE(step, 3) << "the run went on after the loss became non-finite: " << first;

  // Two bad steps in a row tolerated: the third stops the run.
  TrainConfig tolerant = diverging_config();
  tolerant.set_max_nonfinite_steps(2);
  const std::string later = error_of(tolerant);
  EXPECT_NE(later.find("3 check(s) in a row, more than max_nonfinite_steps 2 tolerates"), std::string::npos) << later;
  EXPECT_EQ(step_named(later), step + 2) << later;
}

// Non-finite losses tolerated to the epoch's end: the validation loss is NaN, and the run fails
// there instead of reporting the epoch and going on (a diverged run is never a success).
TEST(DivergenceGuard, ANonFiniteValidationLossFailsTheRun) {
  TrainConfig c = diverging_config();
  c.set_max_steps_per_epoch(3);
  c.set_max_nonfinite_steps(100);
  const std::string message = error_of(c);
  EXPECT_NE(message.find("training diverged: validation loss "), std::string::npos) << message;
  EXPECT_NE(message.find(" after epoch 0 (step 3, "), std::string::npos) << message;
}

TEST(DivergenceGuard, ADivergedModelIsNeverCheckpointed) {
  const std::string dir = shared_dir("diverged") + "_rank" + std::to_string(test::world_rank());
  TrainConfig c = diverging_config();
  c.set_max_nonfinite_steps(100);
  c.set_checkpoint_dir(dir);
  c.set_checkpoint_every_steps(1);
  const std::string message = error_of(c);
  EXPECT_NE(message.find("training diverged: params["), std::string::npos) << message;
  EXPECT_NE(message.find("no checkpoint written"), std::string::npos) << message;
  // Whatever was written before holds finite values.
  std::vector<float> params(1 << 20);
  for (const CheckpointFile& f : list_checkpoints(dir)) {
    proto::CheckpointHeader header;
    read_checkpoint(f.path, &header, {});
    for (const proto::TensorEntry& t : header.tensors()) {
      if (t.name() != "params") continue;
      params.resize(t.count());
      read_checkpoint(f.path, &header, {{"params", params.data(), params.size()}});
      for (float v : params) ASSERT_TRUE(std::isfinite(v)) << f.path;
    }
  }
  fs::remove_all(dir);
}

TEST(FinalCheckpoint, MaxTotalStepsMidEpochWritesOneAndResumeEqualsAnUninterruptedRun) {
  const std::string dir = shared_dir("final_ckpt");
  const std::vector<float> uninterrupted = train(small_config(8));

  TrainConfig first = small_config(5);  // stops at step 2 of epoch 1; no periodic checkpoints
  first.set_checkpoint_dir(dir);
  train(first);
  if (test::world_rank() == 0) {
    const std::vector<CheckpointFile> files = list_checkpoints(dir);
    ASSERT_FALSE(files.empty());
    EXPECT_EQ(files[0].step, 5) << "no checkpoint at the step max_total_steps stopped at";
  }

  TrainConfig second = small_config(8);
  second.set_checkpoint_dir(dir);
  second.set_resume("latest");
  const std::vector<float> resumed = train(second);
  ASSERT_EQ(resumed.size(), uninterrupted.size());
  size_t differ = 0;
  for (size_t i = 0; i < resumed.size(); ++i) differ += resumed[i] != uninterrupted[i];
  EXPECT_EQ(differ, 0u) << "parameters after resume differ from the uninterrupted run";
  remove_shared_dir(dir);
}

// A checkpoint write killed midway leaves ckpt-*.dtrain.tmp behind: the next run removes it (and
// nothing else) before it trains.
TEST(CheckpointRuns, TheNextRunRemovesTemporariesOfKilledWrites) {
  const std::string dir = shared_dir("stale_tmp");
  const std::string stale = dir + "/ckpt-4-0123456789abcdef.dtrain.tmp";
  const std::string other = dir + "/ckpt-4-0123456789abcdef.dtrain.tmp.keep";
  if (test::world_rank() == 0) {
    fs::create_directories(dir);
    std::ofstream(stale) << "half a checkpoint";
    std::ofstream(other) << "not ours";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  TrainConfig c = small_config(1);
  c.set_checkpoint_dir(dir);
  train(c);
  if (test::world_rank() == 0) {
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_TRUE(fs::exists(other));
    EXPECT_EQ(list_checkpoints(dir).size(), 1u);
  }
  remove_shared_dir(dir);
}

TEST(CheckpointRuns, ANewRunInAnOldDirectoryKeepsItsOwnAndLeavesTheOldRunsAlone) {
  const std::string dir = shared_dir("two_runs");
  TrainConfig old_run = small_config(6);
  old_run.set_checkpoint_dir(dir);
  old_run.set_checkpoint_every_steps(2);
  old_run.set_keep_checkpoints(2);
  train(old_run);
  std::vector<CheckpointFile> before;
  if (test::world_rank() == 0) {
    before = list_checkpoints(dir);
    ASSERT_EQ(before.size(), 2u);
    EXPECT_EQ(before[0].step, 6);
    EXPECT_EQ(before[1].step, 4);
  }

  TrainConfig new_run = small_config(2);  // fresh, not resumed, in the same directory
  new_run.set_checkpoint_dir(dir);
  new_run.set_keep_checkpoints(1);
  train(new_run);
  if (test::world_rank() == 0) {
    const std::vector<CheckpointFile> after = list_checkpoints(dir);
    ASSERT_EQ(after.size(), 3u);
    EXPECT_EQ(after[0].step, 2) << "the new run's checkpoint is gone";
    EXPECT_NE(after[0].run_id, before[0].run_id);
    EXPECT_EQ(after[1].path, before[0].path);
    EXPECT_EQ(after[2].path, before[1].path);
  }

  // "latest" is the new run's (step 2), not the old run's step 6: it continues under its id.
  TrainConfig continued = small_config(3);
  continued.set_checkpoint_dir(dir);
  continued.set_keep_checkpoints(1);
  continued.set_resume("latest");
  train(continued);
  if (test::world_rank() == 0) {
    const std::vector<CheckpointFile> after = list_checkpoints(dir);
    ASSERT_EQ(after.size(), 3u);
    EXPECT_EQ(after[0].step, 3);
    EXPECT_NE(after[0].run_id, before[0].run_id);
  }

  // Resumed from the old run's older checkpoint (step 4, while its step 6 exists): a branch under a
  // new id, whose rotation deletes none of the old run's files.
  std::vector<char> path(256, '\0');
  if (test::world_rank() == 0) std::copy(before[1].path.begin(), before[1].path.end(), path.begin());
  MPI_Bcast(path.data(), 256, MPI_CHAR, 0, MPI_COMM_WORLD);
  TrainConfig branch = small_config(6);
  branch.set_checkpoint_dir(dir);
  branch.set_keep_checkpoints(1);
  branch.set_resume(path.data());
  train(branch);
  if (test::world_rank() == 0) {
    const std::vector<CheckpointFile> after = list_checkpoints(dir);
    ASSERT_EQ(after.size(), 4u);
    EXPECT_EQ(after[0].step, 6);
    EXPECT_NE(after[0].run_id, before[0].run_id) << "the branch took the old run's id";
    EXPECT_TRUE(fs::exists(before[0].path) && fs::exists(before[1].path)) << "the branch deleted the old run's files";
  }
  remove_shared_dir(dir);
}

}  // namespace
}  // namespace dtrain::train
