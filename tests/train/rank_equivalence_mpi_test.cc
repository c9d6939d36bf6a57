// Data parallelism changes nothing but speed: on a BN-free model, N ranks with batch B per rank
// must reach the parameters 1 rank reaches with batch N x B (same samples per step, gradients
// averaged), after 5 steps from the same initialization, within 1e-5 relative.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/core/rank_context.h"
#include "runtime/train/trainer.h"
#include "tests/support/mpi_world.h"
#include "tests/train/tiny_config.h"

namespace dtrain::train {
namespace {

TrainConfig small_bn_free_config(int batch_per_rank) {
  TrainConfig c = tiny_synthetic_config();
  c.set_width(8);
  c.set_no_batch_norm(true);
  c.set_synthetic_samples(600);
  c.set_batch_per_rank(batch_per_rank);
  c.set_epochs(1);
  c.set_max_steps_per_epoch(5);
  c.set_base_lr(0.05);
  c.set_warmup_epochs(0);
  c.set_weight_decay(1e-4);
  c.set_seed(3);
  return c;
}

TEST(RankEquivalence, NRanksWithBatchBMatchOneRankWithBatchNB) {
  const int n = test::world_size();
  if (n == 1) GTEST_SKIP() << "needs 2 or more ranks to compare with 1";
  const int batch = 4;

  const core::RankContext world(MPI_COMM_WORLD, core::NodeLayout{});
  Trainer parallel(small_bn_free_config(batch), world);
  models::ParameterSet& p = parallel.parameters();
  const std::vector<float> initial(p.params_flat(), p.params_flat() + p.parameter_count());
  parallel.train_epoch(0);
  const std::vector<float> distributed(p.params_flat(), p.params_flat() + p.parameter_count());
  double moved = 0;
  for (size_t i = 0; i < initial.size(); ++i) moved = std::max(moved, double(std::fabs(distributed[i] - initial[i])));
  EXPECT_GT(moved, 1e-4) << "five steps should move the parameters";

  // Rank 0 alone, with the whole global batch.
  if (test::world_rank() == 0) {
    const core::RankContext alone(MPI_COMM_SELF, core::NodeLayout{});
    TrainConfig single_config = small_bn_free_config(batch * n);
    Trainer single(single_config, alone);
    single.train_epoch(0);
    models::ParameterSet& q = single.parameters();
    ASSERT_EQ(q.parameter_count(), p.parameter_count());
    double worst = 0;
    size_t worst_at = 0;
    for (int64_t i = 0; i < q.parameter_count(); ++i) {
      const double a = distributed[size_t(i)], b = q.params_flat()[i];
      const double rel = std::fabs(a - b) / std::max(1e-3, std::fabs(b));
      if (rel > worst) {
        worst = rel;
        worst_at = size_t(i);
      }
    }
    EXPECT_LE(worst, 1e-5) << "worst relative difference at parameter " << worst_at << " (" << n << " ranks)";
  }
}

}  // namespace
}  // namespace dtrain::train
