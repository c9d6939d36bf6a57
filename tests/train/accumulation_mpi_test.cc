// Gradient accumulation (train/engine/gradient_accumulation.h), on every world
// size the suite runs (1 to 4 ranks):
//  - accumulation_steps K with batch B per rank trains what batch K x B per rank trains: the same
//    images per step, the lr of the same effective global batch, gradients averaged over the K x B
//    images; on a BN-free model the parameters after 5 steps agree within 1e-5 relative, on the
//    CPU path and on GPUs (one per rank; skipped, saying why, without);
//  - the micro-batches before a step's last run no collective at all (a counting communicator);
//  - the metrics count optimizer steps (an epoch's left-over batches dropped) and the lr is the
//    linear rule's for batch_per_rank x ranks x K;
//  - a checkpoint and resume mid-epoch continue bit-identically.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/backends/factory.h"
#include "comm/communicator.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_context.h"
#include "tests/support/mpi_world.h"
#include "tests/train/tiny_config.h"
#include "train/data/sharded_sampler.h"
#include "train/engine/step_engine.h"
#include "train/trainer.h"

namespace dtrain::train {
namespace {

std::vector<float> params_of(Trainer& trainer) {
  models::ParameterSet& p = trainer.parameters();
  return std::vector<float>(p.params_flat(), p.params_flat() + p.flat_size());
}

// Trains one epoch (5 steps) with accumulation_steps K and batch B, then with batch K x B, on all
// ranks, from the same initialization; compares parameters and the epoch's mean loss. gpu: each
// rank's GPU, or -1 for the CPU path.
void expect_accumulation_equivalence(const TrainConfig& config, int k, const runtime::RankContext& world, int gpu) {
  TrainConfig accumulated = config;
  accumulated.set_accumulation_steps(k);
  Trainer micro(resolve(accumulated), world, gpu);
  const std::vector<float> initial = params_of(micro);
  const EpochResult micro_result = micro.train_epoch(0);
  const std::vector<float> with_micro = params_of(micro);

  TrainConfig large = config;
  large.set_batch_per_rank(config.batch_per_rank() * k);
  Trainer whole(resolve(large), world, gpu);
  const EpochResult whole_result = whole.train_epoch(0);
  const std::vector<float> with_whole = params_of(whole);

  ASSERT_EQ(with_micro.size(), with_whole.size());
  double moved = 0, worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < with_whole.size(); ++i) {
    moved = std::max(moved, double(std::fabs(with_whole[i] - initial[i])));
    const double a = with_micro[i], b = with_whole[i];
    const double rel = std::fabs(a - b) / std::max(1e-3, std::fabs(b));
    if (rel > worst) {
      worst = rel;
      worst_at = i;
    }
  }
  EXPECT_GT(moved, 1e-4) << "five steps should move the parameters";
  if (test::world_rank() == 0) {
    std::printf(
        "  %d rank(s), %d micro-batches of %d vs batch %d: worst relative parameter difference %.2e (bound "
        "1e-5), epoch loss %.6f vs %.6f\n",
        test::world_size(), k, config.batch_per_rank(), k * config.batch_per_rank(), worst, micro_result.train_loss,
        whole_result.train_loss);
  }
  EXPECT_LE(worst, 1e-5) << "worst relative difference at parameter " << worst_at;
  // The step's loss is the mean over its micro-batches: the large batch's mean loss.
  EXPECT_NEAR(micro_result.train_loss, whole_result.train_loss, 1e-5 * std::fabs(whole_result.train_loss));
}

TEST(GradientAccumulation, KMicroBatchesOfBMatchOneStepOnKTimesB) {
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  expect_accumulation_equivalence(small_bn_free_config(4), 3, world, -1);
}

// The same on GPUs, fp32 with TF32 off: each backward's gradients folded on the device, the last
// one's buckets all-reduced during backward. With a GPU per rank over NCCL; with fewer GPUs than
// ranks (a 1-GPU machine), every rank its own simulated node sharing the GPU, over the mpi-ring
// backend staged through host memory (NCCL cannot put two ranks on one GPU).
TEST(GradientAccumulation, OnGpusKMicroBatchesOfBMatchOneStepOnKTimesB) {
  const int n = test::world_size();
  const size_t gpus = runtime::detail::runtime_visible_gpus().size();
  if (gpus == 0) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
  TrainConfig config = small_bn_free_config(4);
  config.set_device("gpu");
  config.set_precision("fp32");
  config.set_no_tf32(true);
  const bool shared = gpus < static_cast<size_t>(n);
  if (shared) {
    setenv("DTRAIN_MPI_DEVICE_POINTERS", "stage", 1);
    config.set_backend("mpi-ring");
    // Each rank is its own simulated node, and a GPU job across nodes sends bf16 by default: its
    // rounding alone moves the parameters 1e-5 (1.05e-5 measured), past this test's fp32 bound.
    config.set_gradient_wire_dtype("fp32");
  }
  const runtime::RankContext world(MPI_COMM_WORLD, shared ? runtime::NodeLayout{1, false} : runtime::NodeLayout{});
  const runtime::GpuBinding binding = runtime::bind_gpu(world, shared);
  expect_accumulation_equivalence(config, 3, world, binding.device.index);
}

// Counts every collective a communicator is asked for, and passes it on.
class CountingCommunicator final : public comm::Communicator {
 public:
  explicit CountingCommunicator(std::unique_ptr<comm::Communicator> inner, std::atomic<long>* calls,
                                std::atomic<long>* all_reduces)
      : inner_(std::move(inner)), calls_(calls), all_reduces_(all_reduces) {}
  const char* name() const override { return inner_->name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  comm::Work submit(const comm::Collective& call) override {
    ++*calls_;
    if (call.kind == comm::CollectiveKind::kAllReduce) ++*all_reduces_;
    return inner_->submit(call);
  }
  void set_consistency_check(bool enabled) override { inner_->set_consistency_check(enabled); }

 private:
  std::unique_ptr<comm::Communicator> inner_;
  std::atomic<long>* calls_;
  std::atomic<long>* all_reduces_;
};

// DDP's no_sync: micro-batches 1..K-1 of a step ask the communicator for nothing; the K-th asks
// for one all-reduce per gradient bucket, as a step without accumulation does.
TEST(GradientAccumulation, NoCollectiveBeforeAStepsLastMicroBatch) {
  const int k = 3, batch = 4;
  TrainConfig config = small_bn_free_config(batch);
  config.set_accumulation_steps(k);
  EngineSetup setup;
  setup.config = resolve(config);
  setup.model.blocks_per_stage = {1, 1};
  setup.model.bottleneck = false;
  setup.model.width = config.width();
  setup.model.small_input = true;
  setup.model.batch_norm = false;
  setup.model.num_classes = 10;
  setup.model.in_channels = 3;
  setup.image = ImageShape{12, 12, 3};
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  std::atomic<long> calls{0}, all_reduces{0};
  auto counting = std::make_unique<CountingCommunicator>(comm::make_communicator(comm::Backend::kMpiRing, world, false),
                                                         &calls, &all_reduces);
  const std::unique_ptr<StepEngine> engine = make_cpu_step_engine(setup, std::move(counting));
  const long buckets = static_cast<long>(engine->gradient_buckets());
  ASSERT_GT(calls.load(), 0) << "the engine's start broadcasts rank 0's parameters through the communicator";

  std::mt19937 rng(static_cast<unsigned>(17 + test::world_rank()));
  std::vector<Batch> batches(static_cast<size_t>(k));
  for (Batch& b : batches) {
    b.size = batch;
    b.pixels = runtime::Buffer(runtime::MemoryKind::kHost, setup.image.bytes() * batch);
    auto* pixels = static_cast<uint8_t*>(b.pixels.data());
    for (size_t i = 0; i < b.pixels.bytes(); ++i) pixels[i] = static_cast<uint8_t>(rng());
    for (int i = 0; i < batch; ++i) b.labels.push_back(static_cast<int32_t>(rng() % 10));
  }
  for (int step = 0; step < 3; ++step) {
    for (int m = 0; m < k; ++m) {
      const long calls_before = calls, all_reduces_before = all_reduces;
      engine->train_step(batches[static_cast<size_t>(m)], 0.05f, MicroBatch{m, k});
      (void)engine->finished_batches(true);
      if (m + 1 < k) {
        EXPECT_EQ(calls.load(), calls_before) << "step " << step << ", micro-batch " << m + 1 << " of " << k;
      } else {
        EXPECT_EQ(all_reduces.load() - all_reduces_before, buckets) << "step " << step << ", last micro-batch";
        EXPECT_EQ(calls.load() - calls_before, buckets) << "step " << step << ": all-reduces and nothing else";
      }
    }
  }
  EXPECT_TRUE(std::isfinite(engine->last_loss()));
}

// The number after "key": in a metrics line, or NaN.
double field(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\": ");
  return at == std::string::npos ? std::nan("") : std::strtod(line.c_str() + at + key.size() + 4, nullptr);
}

// An epoch of 100 samples at batch 4 and K 3: floor(floor(100 / ranks / 4) / 3) optimizer steps
// (the batches left over are dropped), each with the lr of the global batch 4 x ranks x 3, and the
// records count optimizer steps.
TEST(GradientAccumulation, StepsCountOptimizerStepsAndTheLrUsesTheEffectiveBatch) {
  const int n = test::world_size(), batch = 4, k = 3;
  TrainConfig config = tiny_synthetic_config();
  config.set_width(4);
  config.set_synthetic_samples(100);
  config.set_batch_per_rank(batch);
  config.set_accumulation_steps(k);
  config.set_epochs(1);
  config.set_warmup_epochs(0);
  config.set_base_lr(0.1);
  config.set_log_every_steps(1);
  // Rank 0's directory; every rank's config names the same file (the trainer checks the configs agree).
  std::string path = (std::filesystem::temp_directory_path() / "dtrain_accumulation_XXXXXX").string();
  if (test::world_rank() == 0 && ::mkdtemp(path.data()) == nullptr) path.clear();
  std::vector<char> bytes(path.begin(), path.end());
  bytes.resize(4096, '\0');
  MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  path = bytes.data();
  ASSERT_FALSE(path.empty()) << "rank 0 could not make a temporary directory";
  const std::string metrics = path + "/metrics.jsonl";
  config.set_metrics_file(metrics);
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  {
    Trainer trainer(resolve(config), world);
    trainer.run();
  }
  if (test::world_rank() != 0) return;
  const long per_rank = static_cast<long>(ShardedSampler(100, n, 0, SamplerOptions{config.seed()}).per_rank());
  const long steps = per_rank / batch / k;
  ASSERT_GT(steps, 0);
  const double lr = 0.1 * (batch * n * k) / 256.0;
  std::ifstream in(metrics);
  long train_records = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"event\": \"train\"") != std::string::npos) {
      ++train_records;
      EXPECT_EQ(field(line, "step"), train_records) << line;
      EXPECT_EQ(field(line, "epoch_steps"), steps) << line;
      EXPECT_NEAR(field(line, "lr"), lr, 1e-9 * lr) << line;
    } else if (line.find("\"event\": \"validation\"") != std::string::npos) {
      EXPECT_EQ(field(line, "step"), steps) << line;
    }
  }
  EXPECT_EQ(train_records, steps) << "one train record per optimizer step (log_every_steps 1)";
  std::filesystem::remove_all(path);
}

// Checkpoints sit at optimizer-step boundaries and a resume goes on at the next step's first
// micro-batch: K = 2, 3 steps an epoch, a checkpoint after step 4 (inside epoch 1), resumed to step
// 8, ends bit-identical to the uninterrupted 8 steps (a resume that skipped or repeated batches, or
// restarted mid-step, would not).
TEST(GradientAccumulation, ResumeFromACheckpointEqualsAnUninterruptedRun) {
  std::string dir = (std::filesystem::temp_directory_path() / "dtrain_accumulation_resume_XXXXXX").string();
  if (test::world_rank() == 0 && ::mkdtemp(dir.data()) == nullptr) dir.clear();
  std::vector<char> bytes(dir.begin(), dir.end());
  bytes.resize(4096, '\0');
  MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  dir = bytes.data();
  ASSERT_FALSE(dir.empty()) << "rank 0 could not make a temporary directory";
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  const auto run = [&](long total_steps, bool first_part, bool resume) {
    TrainConfig c = tiny_synthetic_config();
    c.set_width(4);
    c.set_synthetic_samples(400);
    c.set_batch_per_rank(4);
    c.set_accumulation_steps(2);
    c.set_epochs(10);
    c.set_max_steps_per_epoch(3);
    c.set_warmup_epochs(1);
    c.set_max_total_steps(total_steps);
    if (first_part || resume) c.set_checkpoint_dir(dir);
    if (first_part) c.set_checkpoint_every_steps(4);
    if (resume) c.set_resume("required");
    Trainer trainer(resolve(c), world);
    trainer.run();
    return params_of(trainer);
  };
  const std::vector<float> uninterrupted = run(8, false, false);
  run(4, true, false);
  const std::vector<float> resumed = run(8, false, true);
  ASSERT_EQ(resumed.size(), uninterrupted.size());
  size_t differ = 0;
  for (size_t i = 0; i < resumed.size(); ++i) differ += resumed[i] != uninterrupted[i];
  EXPECT_EQ(differ, 0u) << "parameters after the resume differ from the uninterrupted run";
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::world_rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dtrain::train
