#pragma once
// Test support: the communicators under test, made by name over MPI_COMM_WORLD with simulated
// nodes, and whether this job can run the device cases. Collective where noted.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>

#include "comm/backends/factory.h"
#include "comm/backends/hierarchical_communicator.h"
#include "comm/backends/mpi_communicator.h"
#include "comm/backends/mpi_ring_communicator.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_context.h"
#include "tests/support/mpi_world.h"

namespace dtrain::test {

// "mpi-ring", "mpi", "hierarchical" (nodes of ranks_per_node ranks, the last one smaller if it
// must), and with gpus "nccl"; hierarchical with gpus takes NCCL inside the node.
struct BackendCase {
  std::string name;
  int ranks_per_node = 1;
  bool gpus = false;
};

inline std::string backend_label(const BackendCase& c) {
  std::string label = c.name + "_rpn" + std::to_string(c.ranks_per_node) + (c.gpus ? "_gpu" : "");
  for (char& ch : label) {
    if (ch == '-') ch = '_';
  }
  return label;
}

// For INSTANTIATE_TEST_SUITE_P's name generator.
inline std::string backend_param_label(const testing::TestParamInfo<BackendCase>& info) {
  return backend_label(info.param);
}

struct Backend {
  std::unique_ptr<runtime::RankContext> ctx;
  std::unique_ptr<comm::Communicator> comm;
};

// Collective over MPI_COMM_WORLD. With gpus, binds this rank's GPU first (one per rank).
inline Backend make_backend(const BackendCase& c, comm::RingTuning tuning = {}) {
  Backend b;
  b.ctx = std::make_unique<runtime::RankContext>(MPI_COMM_WORLD, runtime::NodeLayout{c.ranks_per_node, true});
  if (c.gpus) runtime::bind_gpu(*b.ctx, false);
  if (c.name == "mpi-ring") b.comm = std::make_unique<comm::MpiRingCommunicator>(b.ctx->world(), tuning);
  if (c.name == "mpi") b.comm = std::make_unique<comm::MpiCommunicator>(b.ctx->world());
  if (c.name == "hierarchical") b.comm = std::make_unique<comm::HierarchicalCommunicator>(*b.ctx, c.gpus, tuning);
  if (c.name == "nccl") b.comm = comm::make_nccl_communicator(b.ctx->world());
  return b;
}

// Collective: why this job cannot run device cases ("" when it can). NCCL and the GPU training
// tests need a GPU per rank.
inline std::string why_no_gpu_per_rank() {
#if !DTRAIN_WITH_CUDA
  return "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
#else
  int gpus = static_cast<int>(runtime::detail::runtime_visible_gpus().size());
  MPI_Allreduce(MPI_IN_PLACE, &gpus, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (gpus == 0) return "no GPU visible to the CUDA runtime";
  if (gpus < world_size()) {
    return std::to_string(world_size()) + " ranks but " + std::to_string(gpus) + " GPUs: needs one GPU per rank";
  }
  return "";
#endif
}

}  // namespace dtrain::test
