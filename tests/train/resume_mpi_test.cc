// Resume: train k steps with a checkpoint, stop, resume from "latest" and train to 2k. The
// parameters must be identical to an uninterrupted 2k-step run (the whole pipeline is
// deterministic: data order and augmentation from the seed, fixed reduction order).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "runtime/core/rank_context.h"
#include "runtime/train/trainer.h"
#include "tests/support/mpi_world.h"
#include "tests/train/tiny_config.h"

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
  const core::RankContext world(MPI_COMM_WORLD, core::NodeLayout{});
  Trainer trainer(config, world);
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

}  // namespace
}  // namespace dtrain::train
