#include "runtime/rank/rank_bootstrap.h"

#include "runtime/base/log.h"

namespace dtrain::runtime {

RankBootstrap::RankBootstrap(int* argc, char*** argv, const BootstrapOptions& options)
    : mpi_(argc, argv), ctx_(RankContext::from_environment()) {
  if (options.claim_cpu_share) {
    const CpuShare cpus = claim_cpu_share(ctx_.topology().host_local_rank, ctx_.topology().host_local_size);
    if (cpus.widened) {
      DTRAIN_LOG(kInfo) << cpus.describe();
    }
  }
  if (options.bind_gpu) gpu_ = bind_gpu(ctx_, options.allow_gpu_sharing);
}

}  // namespace dtrain::runtime
