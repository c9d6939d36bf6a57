// Fine-tuning in the Trainer on 1 to 4 ranks: init_weights gives every
// rank the file's values (read by rank 0 only), reinit_classifier keeps the run's own classifier,
// a file that does not fit stops every rank with one usage error, and freeze_backbone_epochs trains
// only the classifier (the backbone bit for bit as loaded) before training everything.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "models/resnet.h"
#include "runtime/base/error.h"
#include "runtime/rank/rank_context.h"
#include "tests/support/mpi_world.h"
#include "tests/support/test_seed.h"
#include "tests/train/tiny_config.h"
#include "train/checkpoint/torchvision_weights.h"
#include "train/trainer.h"

namespace dtrain::train {
namespace {

namespace fs = std::filesystem;

TrainConfig fine_tuning_config() {
  TrainConfig c = tiny_synthetic_config();
  c.set_width(4);
  c.set_synthetic_samples(256);
  c.set_batch_per_rank(4);
  c.set_epochs(2);
  c.set_max_steps_per_epoch(2);
  c.set_warmup_epochs(0);
  c.set_base_lr(0.2);
  return c;
}

// Whether slot `name` of `a` and `b` hold the same bits.
bool same_slot(models::ParameterSet& a, models::ParameterSet& b, const std::string& name) {
  const int ia = a.find(name), ib = b.find(name);
  return a.slot(ia).numel == b.slot(ib).numel &&
         std::memcmp(a.param(ia), b.param(ib), static_cast<size_t>(a.slot(ia).numel) * 4) == 0;
}

class FineTuning : public testing::Test {
 protected:
  // Rank 0 writes a file of `classes` classes with random values into a directory every rank names
  // alike; `source` holds the values on every rank.
  void SetUp() override {
    std::string dir = fs::temp_directory_path() / ("dtrain_finetune_" + std::to_string(::getpid()));
    std::vector<char> name(dir.begin(), dir.end());
    name.resize(256, '\0');
    MPI_Bcast(name.data(), 256, MPI_CHAR, 0, MPI_COMM_WORLD);
    dir_ = name.data();
    uint64_t seed = test::world_rank() == 0 ? test::random_seed() : 0;
    MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    seed_ = seed;
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    if (test::world_rank() == 0) fs::remove_all(dir_);
  }

  std::unique_ptr<models::ResNet> write_weights(const std::string& file, int classes) {
    models::ResNetConfig model = resnet_config(resolve(fine_tuning_config()), classes, 3);
    model.seed = seed_;  // not the run's seed: the file's values differ from the run's own
    auto source = std::make_unique<models::ResNet>(model);
    std::mt19937_64 rng(seed_);
    std::uniform_real_distribution<float> u(0.5f, 1.5f);
    models::ParameterSet& p = source->parameters();
    for (size_t id = 0; id < p.state_slots().size(); ++id) {  // the slots, not the alignment gaps between them
      float* state = p.state(static_cast<int>(id));
      for (int64_t i = 0; i < p.state_slots()[id].numel; ++i) state[i] = u(rng);
    }
    if (test::world_rank() == 0) {
      fs::create_directories(dir_);
      export_torchvision_weights(dir_ + "/" + file, source->parameters(), 0, {});
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return source;
  }

  std::string dir_;
  uint64_t seed_ = 0;
};

TEST_F(FineTuning, InitWeightsGivesEveryRankTheFilesValues) {
  const std::unique_ptr<models::ResNet> source = write_weights("same.safetensors", 1000);
  TrainConfig c = fine_tuning_config();
  c.set_init_weights(dir_ + "/same.safetensors");
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  Trainer trainer(resolve(c), world);  // verifies on construction that every replica agrees
  models::ParameterSet& p = trainer.parameters();
  models::ParameterSet& s = source->parameters();
  EXPECT_EQ(std::memcmp(p.params_flat(), s.params_flat(), static_cast<size_t>(p.flat_size()) * 4), 0)
      << "parameters are not the file's (seed " << seed_ << ")";
  EXPECT_EQ(std::memcmp(p.state_flat(), s.state_flat(), static_cast<size_t>(p.state_count()) * 4), 0)
      << "BN running statistics are not the file's (seed " << seed_ << ")";
}

TEST_F(FineTuning, ReinitClassifierKeepsTheRunsOwnClassifier) {
  const std::unique_ptr<models::ResNet> source = write_weights("ten_classes.safetensors", 10);
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  TrainConfig c = fine_tuning_config();
  c.set_init_weights(dir_ + "/ten_classes.safetensors");
  // Another class count without reinit_classifier: one usage error, on every rank.
  EXPECT_THROW(Trainer(resolve(c), world), runtime::UsageError);

  c.set_reinit_classifier(true);
  Trainer tuned(resolve(c), world);
  Trainer scratch(resolve(fine_tuning_config()), world);
  models::ParameterSet& t = tuned.parameters();
  for (const models::ParamSlot& slot : t.slots()) {
    if (slot.name.rfind("fc.", 0) == 0) {
      EXPECT_TRUE(same_slot(t, scratch.parameters(), slot.name)) << slot.name << " is not the run's own";
    } else {
      EXPECT_TRUE(same_slot(t, source->parameters(), slot.name)) << slot.name << " is not the file's";
    }
  }
}

TEST_F(FineTuning, FrozenBackboneTrainsOnlyTheClassifierThenEverything) {
  const std::unique_ptr<models::ResNet> source = write_weights("pretrained.safetensors", 10);
  TrainConfig c = fine_tuning_config();
  c.set_init_weights(dir_ + "/pretrained.safetensors");
  c.set_reinit_classifier(true);
  c.set_freeze_backbone_epochs(1);
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  Trainer trainer(resolve(c), world);
  models::ParameterSet& p = trainer.parameters();
  const std::vector<float> params_before(p.params_flat(), p.params_flat() + p.flat_size());
  const std::vector<float> state_before(p.state_flat(), p.state_flat() + p.state_count());
  trainer.train_epoch(0);
  size_t backbone_moved = 0, classifier_moved = 0;
  models::ParameterSet& after = trainer.parameters();
  for (const models::ParamSlot& slot : after.slots()) {
    if (slot.name.rfind("fc.", 0) == 0) {
      classifier_moved += std::memcmp(after.param(after.find(slot.name)), params_before.data() + slot.offset,
                                      static_cast<size_t>(slot.numel) * 4) != 0;
    } else {
      backbone_moved += !same_slot(after, source->parameters(), slot.name);
    }
  }
  EXPECT_EQ(backbone_moved, 0u) << "backbone slots changed while frozen";
  EXPECT_EQ(classifier_moved, 2u) << "the classifier did not train while the backbone was frozen";
  EXPECT_NE(std::memcmp(after.state_flat(), state_before.data(), state_before.size() * 4), 0)
      << "BN running statistics stopped following the data while frozen (PyTorch's train mode updates them)";

  trainer.train_epoch(1);
  models::ParameterSet& unfrozen = trainer.parameters();
  backbone_moved = 0;
  for (const models::ParamSlot& slot : unfrozen.slots()) {
    if (slot.name.rfind("fc.", 0) != 0) backbone_moved += !same_slot(unfrozen, source->parameters(), slot.name);
  }
  EXPECT_EQ(backbone_moved, unfrozen.slots().size() - 2) << "every backbone slot trains after the frozen epochs";
}

}  // namespace
}  // namespace dtrain::train
