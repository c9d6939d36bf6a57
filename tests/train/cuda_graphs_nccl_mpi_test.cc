// CUDA graphs with NCCL (DTRAIN_CUDA_GRAPHS=1, one GPU per rank): the step is captured as graphs
// cut at each bucket's all-reduce, which stays eager between the launches. On fresh random images
// (each rank its own, same seed across the two runs) a small bf16 ResNet with batch norm and small
// buckets (several cuts) trains 12 steps eagerly and 12 steps with graphs from the same
// initialization; every rank's losses and final parameters must match its eager run within bf16
// noise (the bound: the larger of a floor and 4x the difference of two eager runs), and the
// replicas must hold the same parameters. Skips, saying why, without a GPU per rank or NCCL.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_context.h"
#include "tests/support/mpi_world.h"

#if DTRAIN_WITH_CUDA
#include "comm/backends/factory.h"
#include "runtime/memory/buffer.h"
#include "tests/support/test_seed.h"
#include "tests/train/cuda_graphs_test_support.h"
#endif

namespace dtrain::train {
namespace {

#if DTRAIN_WITH_CUDA
using RunResult = StepTrajectory;

RunResult train(bool graphs, comm::Communicator& comm, int device, uint64_t seed) {
  cuda::GpuStepOptions o = graph_test_step_options(graphs);
  o.buckets = comm::BucketSizes{16 << 10, 4 << 10, 0};  // several buckets: several cuts
  cuda::GpuTrainStep step(o, &comm, device);
  runtime::Buffer images(runtime::MemoryKind::kPinnedHost, size_t{kSteps} * kBatch * 3 * kSide * kSide);
  runtime::Buffer labels(runtime::MemoryKind::kPinnedHost, size_t{kSteps} * kBatch * sizeof(int32_t));
  std::mt19937 rng(static_cast<unsigned>(seed) + 7919u * static_cast<unsigned>(test::world_rank()));
  for (size_t i = 0; i < images.bytes(); ++i) static_cast<uint8_t*>(images.data())[i] = static_cast<uint8_t>(rng());
  auto* label = static_cast<int32_t*>(labels.data());
  for (size_t i = 0; i < size_t{kSteps} * kBatch; ++i) label[i] = static_cast<int32_t>(rng() % kClasses);
  RunResult r;
  models::ParameterSet& p = step.model().parameters();
  r.initial.assign(p.params_flat(), p.params_flat() + p.flat_size());
  for (int s = 0; s < kSteps; ++s) {
    step.run(static_cast<const uint8_t*>(images.data()) + size_t(s) * kBatch * 3 * kSide * kSide,
             label + size_t(s) * kBatch, 0.02f * static_cast<float>(1 + s % 3));
    r.losses.push_back(step.last_result().mean_loss);
  }
  step.synchronize();
  step.model().sync_to_host();
  r.params.assign(p.params_flat(), p.params_flat() + p.flat_size());
  r.replays = step.graph_replays();
  r.report = step.cuda_graphs_report();
  return r;
}

TEST(CudaGraphsNccl, ReplayedStepsWithBucketAllReducesTrainAsTheEagerStep) {
  const int n = test::world_size();
  if (n == 1) GTEST_SKIP() << "needs 2 or more ranks (one rank has no all-reduce to cut at)";
  const size_t gpus = runtime::detail::runtime_visible_gpus().size();
  if (gpus < static_cast<size_t>(n)) {
    GTEST_SKIP() << "needs a GPU per rank: " << gpus << " visible to the CUDA runtime, " << n << " ranks";
  }
  const runtime::RankContext world(MPI_COMM_WORLD, runtime::NodeLayout{});
  const runtime::GpuBinding binding = runtime::bind_gpu(world, false);
  std::unique_ptr<comm::Communicator> comm = comm::make_communicator(comm::Backend::kNccl, world, true);
  uint64_t seed = test::random_seed();
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (test::world_rank() == 0) std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  const int device = binding.device.index;
  const RunResult eager = train(false, *comm, device, seed), again = train(false, *comm, device, seed);
  const RunResult graphed = train(true, *comm, device, seed);
  const GraphsAgainstEager d = compare_to_eager(graphed, eager, again);
  std::printf(
      "  rank %d: graphs %s; eager vs eager: updates %.2e, losses %.2e; graphs vs eager: updates %.2e, "
      "losses %.2e\n",
      test::world_rank(), graphed.report.c_str(), d.noise_update, d.noise_loss, d.update, d.loss);
  EXPECT_EQ(graphed.replays, kSteps - cuda::GpuTrainStep::kEagerStepsBeforeCapture) << graphed.report;
  EXPECT_LE(d.update, d.update_bound());
  EXPECT_LE(d.loss, d.loss_bound());
  // The replicas agree: every rank's parameters against rank 0's.
  std::vector<float> rank0 = graphed.params;
  MPI_Bcast(rank0.data(), static_cast<int>(rank0.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  size_t apart = 0;
  for (size_t i = 0; i < rank0.size(); ++i) apart += rank0[i] != graphed.params[i];
  EXPECT_EQ(apart, 0u) << "parameters on rank " << test::world_rank() << " that differ from rank 0's";
}

#else
TEST(CudaGraphsNccl, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::train
