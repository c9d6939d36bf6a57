#include "comm/backends/factory.h"

#include <string>

#include "comm/backends/hierarchical_communicator.h"
#include "comm/backends/mpi_communicator.h"
#include "comm/backends/mpi_ring_communicator.h"
#include "comm/host/mpi_features.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/mpi/collective_usage_check.h"

namespace dtrain::comm {

Backend resolve_backend(Backend requested, const runtime::Topology& topology, bool gpus) {
  if (requested != Backend::kAuto) return requested;
  // Across nodes the hierarchical scheme sends each byte over the network once per node instead of
  // once per rank boundary; measured on cluster/sim, CPU ranks too (bench/results/*_cpu/sim_*).
  if (topology.node_count > 1) return Backend::kHierarchical;
  return gpus ? Backend::kNccl : Backend::kMpiRing;
}

std::unique_ptr<Communicator> make_communicator(Backend requested, const runtime::RankContext& ctx, bool gpus,
                                                DType cross_node_wire, SixteenBitSum sum16) {
  const Backend backend = resolve_backend(requested, ctx.topology(), gpus);
  // Collective: a rank that finds a problem must not leave the others waiting in the backend's
  // constructor (settings passed differently to different ranks).
  runtime::collective_usage_check(ctx.world(), [&] {
    DTRAIN_USAGE_CHECK(sum16 == SixteenBitSum::kFp32 || backend == Backend::kNccl)
        << "native 16-bit sums are the nccl backend's (NCCL adds bf16 and fp16 natively), and this job's backend is "
        << backend_name(backend) << (requested == Backend::kAuto ? " (auto)" : "")
        << "; the other backends add 16-bit values in fp32";
    DTRAIN_USAGE_CHECK(gpus || backend != Backend::kNccl) << "the nccl backend needs GPUs, and this run is in CPU mode";
    DTRAIN_USAGE_CHECK(cross_node_wire == DType::kF32 || backend == Backend::kHierarchical)
        << "a " << runtime::dtype_name(cross_node_wire)
        << " cross-node wire needs the hierarchical backend, and this job's is " << backend_name(backend)
        << (requested == Backend::kAuto ? " (auto, one node)" : "");
  });
  const RingTuning tuning = ring_tuning_from_env();
  DTRAIN_LOG0(kInfo) << "communicator: " << backend_name(backend)
                     << (requested == Backend::kAuto ? " (auto: " : " (requested: ") << ctx.topology().node_count
                     << " node(s), " << (gpus ? "GPUs" : "CPU") << "), ring segment " << tuning.segment_bytes
                     << " B, MPI " << (mpi_reports_cuda_support() ? "reports" : "does not report")
                     << " CUDA support (mpi-ring device buffers: " << device_pointer_mode_name(device_pointer_mode())
                     << ")"
                     << (cross_node_wire != DType::kF32
                             ? std::string(", cross-node wire ") + runtime::dtype_name(cross_node_wire)
                             : std::string())
                     << (sum16 == SixteenBitSum::kNative ? ", native 16-bit sums" : "");
  switch (backend) {
    case Backend::kMpiRing: return std::make_unique<MpiRingCommunicator>(ctx.world(), tuning);
    case Backend::kMpi: return std::make_unique<MpiCommunicator>(ctx.world());
    case Backend::kNccl: return make_nccl_communicator(ctx.world(), sum16);
    case Backend::kHierarchical: return std::make_unique<HierarchicalCommunicator>(ctx, gpus, tuning, cross_node_wire);
    case Backend::kAuto: break;
  }
  DTRAIN_FAIL() << "unresolved backend";
}

}  // namespace dtrain::comm
