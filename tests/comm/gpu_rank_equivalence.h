#pragma once
// Test support for the GPU rank-equivalence tests across simulated nodes: N GPUs with batch B
// trained through the Trainer against 1 GPU with batch N x B (the BN-free model of
// tests/train/tiny_config.h, fp32, TF32 off, one epoch), compared parameter by parameter.
#include <mpi.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/rank/rank_context.h"
#include "tests/train/tiny_config.h"
#include "train/trainer.h"

namespace dtrain::test {

struct OneGpuComparison {
  double worst_relative = -1;   // max over parameters of |a - b| / max(1e-3, |b|)
  double difference_norm = -1;  // ||a - b||_2
  double update_norm = -1;      // ||b - b0||_2: how far the 1-GPU epoch moved the parameters
};

inline train::TrainConfig gpu_bn_free_config(int batch_per_rank, const std::string& backend) {
  train::TrainConfig c = train::small_bn_free_config(batch_per_rank);
  c.set_device("gpu");
  c.set_precision("fp32");
  c.set_no_tf32(true);
  c.set_backend(backend);
  return c;
}

// Collective over world.world(): every rank trains an epoch on `backend` with the cross-node
// `wire`, on its GPU `gpu`, in world's layout, device buffers staged through the host as on hosts
// whose MPI has no CUDA support; then rank 0 trains 1 GPU (the same one, alone) with N x the batch
// and an fp32 wire. The comparison on rank 0; -1s elsewhere.
inline OneGpuComparison compare_with_one_gpu(const runtime::RankContext& world, int gpu, const std::string& backend,
                                             const std::string& wire) {
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "stage", 1);
  int n = 0, rank = 0;
  MPI_Comm_size(world.world(), &n);
  MPI_Comm_rank(world.world(), &rank);
  const int batch = 4;
  train::TrainConfig config = gpu_bn_free_config(batch, backend);
  config.set_gradient_wire_dtype(wire);
  train::Trainer parallel(train::resolve(config), world, gpu);
  parallel.train_epoch(0);
  models::ParameterSet& trained = parallel.parameters();
  const std::vector<float> distributed(trained.params_flat(), trained.params_flat() + trained.flat_size());
  if (rank != 0) return {};
  const runtime::RankContext alone(MPI_COMM_SELF, runtime::NodeLayout{});
  config.set_batch_per_rank(batch * n);
  config.set_backend("auto");
  config.set_gradient_wire_dtype("fp32");
  train::Trainer single(train::resolve(config), alone, gpu);
  models::ParameterSet& q = single.parameters();
  const std::vector<float> initial(q.params_flat(), q.params_flat() + q.flat_size());
  single.train_epoch(0);
  models::ParameterSet& p = single.parameters();
  EXPECT_EQ(static_cast<size_t>(p.flat_size()), distributed.size());
  OneGpuComparison c{0, 0, 0};
  for (size_t i = 0; i < std::min(distributed.size(), static_cast<size_t>(p.flat_size())); ++i) {
    const double a = distributed[i], b = p.params_flat()[i];
    c.worst_relative = std::max(c.worst_relative, std::fabs(a - b) / std::max(1e-3, std::fabs(b)));
    c.difference_norm += (a - b) * (a - b);
    c.update_norm += (b - initial[i]) * (b - initial[i]);
  }
  c.difference_norm = std::sqrt(c.difference_norm);
  c.update_norm = std::sqrt(c.update_norm);
  return c;
}

}  // namespace dtrain::test
