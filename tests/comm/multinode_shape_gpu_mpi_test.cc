// GPU rank equivalence at the real multi-node shape: simulated nodes of several GPUs, so that the
// hierarchical backend runs NCCL inside each node and the staged host ring across nodes on each
// shard (multinode_training_gpu_mpi_test.cc fixes one rank per node). The layout comes from
// DTRAIN_RANKS_PER_NODE, read as dtrain-train reads it: scripts/gpu_checks.sh runs 4 ranks at
// DTRAIN_RANKS_PER_NODE=2 (2 nodes x 2 GPUs) and =1 (4 x 1). One GPU per rank, by host-local rank.
//   NodeShapeEquivalence/<backend>_<wire>: N GPUs with batch B against 1 GPU with batch N x B (the
//   BN-free model, fp32, TF32 off, an fp32 wire on the 1 GPU), after an epoch of 5 steps:
//   - fp32 wire: every parameter within 1e-5 relative, as the one-rank-per-node tests.
//   - bf16 wire: with k nodes an element of a cross-node sum is rounded to bf16 at most k times
//     (hierarchical_communicator.h), each time off by at most u = 2^-8 of the partial sum rounded.
//     To first order the trained parameters are then off by at most k u times the path the
//     parameters took, so ||a - b|| <= 2 k u ||b - b0||, where ||b - b0|| is how far the 1-GPU
//     epoch moved them and the 2 allows for partial sums larger than their total (gradients of
//     different batches cancel in part) and for a path longer than its end-to-end displacement.
//     And somewhere more than 1e-5 relative: the wire was applied.
// Skips, saying why: fewer than 2 ranks; DTRAIN_RANKS_PER_NODE unset or making a single node; a
// build without CUDA or fewer GPUs than ranks; a bf16 wire on mpi-ring where this build refuses it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "runtime/base/error.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_context.h"
#include "tests/comm/gpu_rank_equivalence.h"
#include "tests/comm/test_backends.h"
#include "tests/comm/watchdog.h"
#include "tests/support/mpi_world.h"

namespace dtrain::test {
namespace {

struct ShapeCase {
  std::string backend;
  std::string wire;
};

std::string case_label(const testing::TestParamInfo<ShapeCase>& info) {
  return (info.param.backend == "mpi-ring" ? std::string("mpi_ring") : info.param.backend) + "_" + info.param.wire;
}

// Collective: why this job cannot run these cases ("" when it can). The layout is checked before
// the GPUs, so that a job without DTRAIN_RANKS_PER_NODE skips for that reason on a GPU machine.
std::string why_not_node_shape() {
  if (world_size() < 2) return "needs 2 or more ranks to make 2 simulated nodes";
  if (std::getenv("DTRAIN_RANKS_PER_NODE") == nullptr) {
    return "DTRAIN_RANKS_PER_NODE is unset: set it (2 or 1 with 4 ranks) to choose the simulated nodes";
  }
  return why_no_gpu_per_rank();
}

class NodeShapeEquivalence : public testing::TestWithParam<ShapeCase> {};

TEST_P(NodeShapeEquivalence, NGpusWithBatchBMatchOneGpuWithBatchNB) {
  if (const std::string why = why_not_node_shape(); !why.empty()) GTEST_SKIP() << why;
  const ShapeCase& c = GetParam();
  const runtime::RankContext world = runtime::RankContext::from_environment(MPI_COMM_WORLD);
  const runtime::Topology& topo = world.topology();
  if (topo.node_count < 2) GTEST_SKIP() << "DTRAIN_RANKS_PER_NODE makes one node of all ranks: nothing crosses nodes";
  Watchdog watchdog(c.backend + " " + c.wire + " rank equivalence at " + std::to_string(topo.node_count) + " nodes",
                    300);
  const runtime::GpuBinding binding = runtime::bind_gpu(world, false);
  OneGpuComparison r;
  try {
    r = compare_with_one_gpu(world, binding.device.index, c.backend, c.wire);
  } catch (const runtime::UsageError& e) {
    // Every rank refuses the same configuration, before any collective of the training.
    if (c.backend != "mpi-ring" || c.wire == "fp32") throw;
    if (world_rank() == 0)
      std::printf("  %s with a %s wire refused: %s\n", c.backend.c_str(), c.wire.c_str(), e.what());
    GTEST_SKIP() << "this build's " << c.backend << " carries no " << c.wire << " wire";
  }
  if (world_rank() != 0) return;
  const int k = topo.node_count;
  const std::string shape = std::to_string(k) + " simulated nodes x " + std::to_string(topo.local_size) + " GPU(s)";
  if (c.wire == "fp32") {
    std::printf(
        "  %s, fp32 wire, %s vs 1 GPU with %dx the batch: worst relative parameter difference %.2e (bound 1e-5)\n",
        c.backend.c_str(), shape.c_str(), world_size(), r.worst_relative);
    EXPECT_LE(r.worst_relative, 1e-5);
    return;
  }
  const double u = 1.0 / 256;  // bf16's unit roundoff: 8 significant bits
  const double bound = 2 * k * u * r.update_norm;
  std::printf(
      "  %s, %s wire, %s vs 1 GPU (fp32) with %dx the batch: ||difference|| %.3e = %.2e of the 1-GPU update "
      "(bound 2*%d*2^-8 = %.2e); worst relative %.2e (must exceed 1e-5)\n",
      c.backend.c_str(), c.wire.c_str(), shape.c_str(), world_size(), r.difference_norm,
      r.difference_norm / r.update_norm, k, 2 * k * u, r.worst_relative);
  EXPECT_GT(r.update_norm, 0) << "the 1-GPU epoch did not move the parameters";
  EXPECT_LE(r.difference_norm, bound);
  EXPECT_GT(r.worst_relative, 1e-5) << "no trace of a 16-bit wire";
}

INSTANTIATE_TEST_SUITE_P(Wires, NodeShapeEquivalence,
                         testing::Values(ShapeCase{"hierarchical", "fp32"}, ShapeCase{"hierarchical", "bf16"},
                                         ShapeCase{"mpi-ring", "fp32"}, ShapeCase{"mpi-ring", "bf16"}),
                         case_label);

}  // namespace
}  // namespace dtrain::test
