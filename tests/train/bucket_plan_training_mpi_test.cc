// Where the gradient buckets are cut changes nothing but when their all-reduces start: the CPU
// path trained with equal buckets and with a small first and tail bucket (cut at parameter
// boundaries) reaches the same parameters, bit for bit on 1-2 ranks (a sum of two rounds the same
// in either order) and within 1e-6 relative (norm-wise) on 3-4, where the ring's summation chain
// for an element depends on where the element falls in its bucket (the synchronizer test holds
// each plan to the float64 average).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "runtime/rank/rank_context.h"
#include "tests/support/mpi_world.h"
#include "tests/train/tiny_config.h"
#include "train/trainer.h"

namespace dtrain::train {
namespace {

// 4 steps of a small ResNet wide enough (3.5 MB of gradients) for several 1-2 MiB buckets.
std::vector<float> trained_parameters(int bucket_mib, int tail_bucket_mib, int first_bucket_mib) {
  TrainConfig c = small_bn_free_config(4);
  c.set_width(96);
  c.set_max_steps_per_epoch(4);
  c.set_bucket_mib(bucket_mib);
  c.set_tail_bucket_mib(tail_bucket_mib);
  c.set_first_bucket_mib(first_bucket_mib);
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  Trainer trainer(resolve(c), world, -1);
  trainer.train_epoch(0);
  models::ParameterSet& p = trainer.parameters();
  return std::vector<float>(p.params_flat(), p.params_flat() + p.flat_size());
}

TEST(BucketPlanTraining, TailAndFirstBucketsTrainLikeEqualBuckets) {
  const std::vector<float> equal = trained_parameters(2, 0, 0);
  const std::vector<float> shaped = trained_parameters(2, 1, 1);
  ASSERT_EQ(equal.size(), shaped.size());
  EXPECT_GT(equal.size(), size_t{1} << 19) << "a model of several buckets";
  // Norm-wise: a parameter near zero may differ by a few of the others' units in the last place.
  double difference = 0, norm = 0;
  for (size_t i = 0; i < equal.size(); ++i) {
    difference += (double(equal[i]) - shaped[i]) * (double(equal[i]) - shaped[i]);
    norm += double(equal[i]) * equal[i];
  }
  const double relative = std::sqrt(difference / norm);
  if (test::world_rank() == 0) {
    std::printf("  %d ranks: |equal - tail and first| / |equal| = %.2e over %zu parameters\n", test::world_size(),
                relative, equal.size());
  }
  if (test::world_size() <= 2) {
    EXPECT_TRUE(equal == shaped) << "relative difference " << relative;
  } else {
    EXPECT_LE(relative, 1e-6);
  }
}

}  // namespace
}  // namespace dtrain::train
