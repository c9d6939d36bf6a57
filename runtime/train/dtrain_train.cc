// dtrain-train: data-parallel training of the ResNet family.
//   mpirun -np 4 build/bin/dtrain-train --config configs/fashion_mnist.pbtxt
#include "runtime/core/cpu_affinity.h"
#include "runtime/core/gpu_binding.h"
#include "runtime/core/log.h"
#include "runtime/core/main_guard.h"
#include "runtime/core/mpi_scope.h"
#include "runtime/core/rank_context.h"
#include "runtime/train/trainer.h"

namespace dtrain::train {
namespace {

int train_main(int argc, char** argv) {
  ResolvedConfig config;
  if (!load_train_config(argc, argv, &config)) return 0;
  core::MpiScope mpi(&argc, &argv);
  const core::RankContext ctx = core::RankContext::from_environment();
  // Before any thread starts: the loader's threads inherit the mask.
  const core::CpuShare cpus = core::claim_cpu_share(ctx.topology().host_local_rank, ctx.topology().host_local_size);
  if (cpus.widened) {
    DTRAIN_LOG(kInfo) << cpus.describe();
  }
  // --device cpu needs no GPU per rank: GPUs are neither bound nor counted.
  core::GpuBinding binding;
  if (config.device != DeviceChoice::kCpu) binding = core::bind_gpu(ctx, false);
  const bool real_gpu = !binding.cpu_mode && !binding.device.simulated;
  Trainer trainer(config, ctx, real_gpu ? binding.device.index : -1);
  trainer.run();
  return trainer.stopped_by_signal() ? core::kExitPreempted : 0;
}

}  // namespace
}  // namespace dtrain::train

int main(int argc, char** argv) { return dtrain::core::run_main(argc, argv, dtrain::train::train_main); }
