// A bf16 cross-node wire on the flat mpi-ring backend, at training level on the CPU path: the
// world split into 2 simulated nodes, a BN-free small ResNet trained 5 steps on the same batches
// with an fp32 and a bf16 wire. Every gradient bucket's average crosses as bf16 (one rounding per
// rank at most, mpi_ring_communicator.h), so the bf16 run leaves the fp32 one, measurably (the
// wire was applied) but by a few bf16 roundings of the update, and its replicas stay identical. Needs 2 or more ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "comm/backends/factory.h"
#include "runtime/io/fingerprint.h"
#include "runtime/mpi/mpi_agreement.h"
#include "runtime/rank/rank_context.h"
#include "tests/comm/collective_reference.h"
#include "tests/support/mpi_world.h"
#include "tests/train/tiny_config.h"
#include "train/config/resolved_config.h"
#include "train/engine/step_engine.h"

namespace dtrain::train {
namespace {

EngineSetup bn_free_setup(int batch) {
  TrainConfig config = small_bn_free_config(batch);
  // The communicator alone narrows: the synchronizer's buckets stay fp32 (on CPUs an explicit
  // bf16 there would narrow every bucket, inside nodes too).
  config.set_gradient_wire_dtype("fp32");
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
  return setup;
}

// The parameters after `steps` steps on this rank's batches, over mpi-ring with `wire` between nodes.
std::vector<float> trained(const runtime::RankContext& ctx, runtime::DType wire, const std::vector<Batch>& batches,
                           std::vector<float>* initial) {
  const EngineSetup setup = bn_free_setup(batches.front().size);
  std::unique_ptr<StepEngine> engine =
      make_cpu_step_engine(setup, comm::make_communicator(comm::Backend::kMpiRing, ctx, false, wire));
  models::ParameterSet& start = engine->parameters();
  *initial = std::vector<float>(start.params_flat(), start.params_flat() + start.flat_size());
  for (const Batch& b : batches) {
    engine->train_step(b, 0.05f, MicroBatch{0, 1});
    (void)engine->finished_batches(true);
  }
  models::ParameterSet& p = engine->parameters();
  return std::vector<float>(p.params_flat(), p.params_flat() + p.flat_size());
}

TEST(CrossNodeWireTraining, Bf16MpiRingAcrossTwoNodesTracksFp32) {
  const int n = test::world_size();
  if (n < 2) GTEST_SKIP() << "2 simulated nodes need 2 or more ranks; this job has " << n;
  const runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{(n + 1) / 2, true});
  ASSERT_EQ(ctx.topology().node_count, 2);
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  std::mt19937_64 rng(seed + static_cast<uint64_t>(test::world_rank()));
  const int batch = 4;
  std::vector<Batch> batches(5);
  for (Batch& b : batches) {
    b.size = batch;
    b.pixels = runtime::Buffer(runtime::MemoryKind::kHost, ImageShape{12, 12, 3}.bytes() * batch);
    auto* pixels = static_cast<uint8_t*>(b.pixels.data());
    for (size_t i = 0; i < b.pixels.bytes(); ++i) pixels[i] = static_cast<uint8_t>(rng());
    for (int i = 0; i < batch; ++i) b.labels.push_back(static_cast<int32_t>(rng() % 10));
  }
  std::vector<float> initial;
  const std::vector<float> fp32 = trained(ctx, runtime::DType::kF32, batches, &initial);
  const std::vector<float> bf16 = trained(ctx, runtime::DType::kBF16, batches, &initial);
  ASSERT_EQ(fp32.size(), bf16.size());
  EXPECT_TRUE(runtime::same_on_every_rank(MPI_COMM_WORLD, runtime::fingerprint(bf16.data(), bf16.size() * 4)))
      << "replicas differ with a bf16 wire, seed " << seed;
  // How far the bf16 run is from the fp32 one, against how far the fp32 run moved: a bf16 rounding
  // errs by 2^-8 relative at most, each gradient average is rounded at most n times (n ranks), and
  // five steps may compound it a little: at most 2 n 2^-8. Anything above 0 shows the wire narrowed.
  double off = 0, moved = 0;
  for (size_t i = 0; i < fp32.size(); ++i) {
    off += (double(bf16[i]) - fp32[i]) * (double(bf16[i]) - fp32[i]);
    moved += (double(fp32[i]) - initial[i]) * (double(fp32[i]) - initial[i]);
  }
  const double ratio = std::sqrt(off / moved);
  const double bound = 2.0 * n * std::ldexp(1.0, -8);
  if (test::world_rank() == 0) {
    std::printf(
        "  mpi-ring, %d ranks on 2 simulated nodes, 5 steps: |bf16 wire - fp32 wire| / |fp32 wire - initial| "
        "= %.2e (bound (1e-6, %.2e]), seed %llu\n",
        n, ratio, bound, static_cast<unsigned long long>(seed));
  }
  EXPECT_GT(moved, 0.0) << "five steps should move the parameters";
  EXPECT_GT(ratio, 1e-6) << "no trace of a bf16 wire, seed " << seed;
  EXPECT_LE(ratio, bound) << "seed " << seed;
}

}  // namespace
}  // namespace dtrain::train
