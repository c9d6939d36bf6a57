// dtrain-train: data-parallel training of the ResNet family.
//   mpirun -np 4 build/bin/dtrain-train --config configs/fashion_mnist_resnet.pbtxt
#include "comm/diagnostics/fault_injection.h"
#include "runtime/mpi/main_guard.h"
#include "runtime/rank/rank_bootstrap.h"
#include "runtime/rank/stop_signals.h"
#include "train/trainer.h"

namespace dtrain::train {
namespace {

int train_main(int argc, char** argv) {
  ResolvedConfig config;
  runtime::BootstrapOptions options;
  if (!runtime::read_before_mpi([&] { return load_train_config(argc, argv, &config); }, &options)) return 0;
  // Before MPI starts, and never reset: a stop signal at any moment from here on ends the run
  // cleanly with kExitPreempted (the trainer checks for one before its first step).
  runtime::install_stop_signals(config.stop_signals);
  options.bind_gpu = config.device != DeviceChoice::kCpu;  // --device cpu: GPUs neither bound nor counted
  options.allow_gpu_sharing = config.fields.allow_gpu_sharing();
  options.claim_cpu_share = true;  // the loader's threads inherit the mask
  const runtime::RankBootstrap rank(&argc, &argv, options);
  if (rank.exit_agreed()) return 0;
  comm::raise_injected_signal("bootstrap");
  bool stopped = false;
  {
    Trainer trainer(config, rank.ctx(), rank.real_gpu_index());
    trainer.run();
    stopped = trainer.stopped_by_signal();
  }
  // A stop signal from here on is recorded and ignored: the run already finished (or stopped).
  comm::raise_injected_signal("teardown");
  return stopped ? runtime::kExitPreempted : 0;
}

}  // namespace
}  // namespace dtrain::train

int main(int argc, char** argv) {
  return dtrain::runtime::run_main(argc, argv, dtrain::train::train_main);
}
