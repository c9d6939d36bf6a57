// Data parallelism changes nothing but speed: on a BN-free model, N ranks with batch B per rank
// must reach the parameters 1 rank reaches with batch N x B (same samples per step, gradients
// averaged), after 5 steps from the same initialization, within 1e-5 relative: on the CPU path,
// and on GPUs (one per rank; skipped, saying why, when there are fewer).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_context.h"
#include "tests/support/mpi_world.h"
#include "tests/train/tiny_config.h"
#include "train/trainer.h"

namespace dtrain::train {
namespace {

// Trains `config` 5 steps on all ranks (batch B each) and, on rank 0 alone, with batch N x B, and
// compares the parameters. gpu: each rank's GPU for the GPU path, or -1 for the CPU path.
void expect_rank_equivalence(TrainConfig config, int gpu) {
  const int n = test::world_size();
  const int batch = config.batch_per_rank();
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  Trainer parallel(resolve(config), world, gpu);
  models::ParameterSet& p = parallel.parameters();
  const std::vector<float> initial(p.params_flat(), p.params_flat() + p.flat_size());
  parallel.train_epoch(0);
  models::ParameterSet& trained = parallel.parameters();
  const std::vector<float> distributed(trained.params_flat(), trained.params_flat() + trained.flat_size());
  double moved = 0;
  for (size_t i = 0; i < initial.size(); ++i) moved = std::max(moved, double(std::fabs(distributed[i] - initial[i])));
  EXPECT_GT(moved, 1e-4) << "five steps should move the parameters";

  // Rank 0 alone, with the whole global batch.
  if (test::world_rank() == 0) {
    const runtime::RankContext alone(MPI_COMM_SELF, runtime::NodeLayout{});
    config.set_batch_per_rank(batch * n);
    Trainer single(resolve(config), alone, gpu);
    single.train_epoch(0);
    models::ParameterSet& q = single.parameters();
    ASSERT_EQ(q.flat_size(), p.flat_size());
    double worst = 0;
    size_t worst_at = 0;
    for (int64_t i = 0; i < q.flat_size(); ++i) {
      const double a = distributed[size_t(i)], b = q.params_flat()[i];
      const double rel = std::fabs(a - b) / std::max(1e-3, std::fabs(b));
      if (rel > worst) {
        worst = rel;
        worst_at = size_t(i);
      }
    }
    std::printf("  %d ranks vs 1 rank with %dx the batch: worst relative parameter difference %.2e (bound 1e-5)\n", n,
                n, worst);
    EXPECT_LE(worst, 1e-5) << "worst relative difference at parameter " << worst_at << " (" << n << " ranks)";
  }
}

TEST(RankEquivalence, NRanksWithBatchBMatchOneRankWithBatchNB) {
  if (test::world_size() == 1) GTEST_SKIP() << "needs 2 or more ranks to compare with 1";
  expect_rank_equivalence(small_bn_free_config(4), -1);
}

// The same on GPUs, one per rank, fp32 with TF32 off: NCCL averaging the gradient buckets during
// backward changes nothing but speed.
TEST(RankEquivalence, OnGpusNRanksWithBatchBMatchOneGpuWithBatchNB) {
  const int n = test::world_size();
  if (n == 1) GTEST_SKIP() << "needs 2 or more ranks to compare with 1";
  const size_t gpus = runtime::detail::runtime_visible_gpus().size();
  if (gpus < static_cast<size_t>(n)) {
    GTEST_SKIP() << "needs a GPU per rank: " << gpus << " visible to the CUDA runtime, " << n << " ranks";
  }
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  const runtime::GpuBinding binding = runtime::bind_gpu(world, false);
  TrainConfig config = small_bn_free_config(4);
  config.set_device("gpu");
  config.set_precision("fp32");
  config.set_no_tf32(true);
  expect_rank_equivalence(config, binding.device.index);
}

}  // namespace
}  // namespace dtrain::train
