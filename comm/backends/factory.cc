#include "comm/backends/factory.h"

#include <string>

#include "comm/backends/hierarchical_communicator.h"
#include "comm/backends/mpi_communicator.h"
#include "comm/backends/mpi_ring_communicator.h"
#include "comm/diagnostics/consistency_check.h"
#include "comm/host/mpi_features.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/mpi/collective_usage_check.h"

namespace dtrain::comm {

std::unique_ptr<Communicator> make_communicator(Backend requested, const runtime::RankContext& ctx, bool gpus,
                                                std::optional<DType> cross_node_wire, SixteenBitSum sum16) {
  const runtime::Topology& topology = ctx.topology();
  // Ranks that read DTRAIN_NCCL_ACROSS_NODES differently would build different communicators.
  if (requested == Backend::kAuto && gpus && topology.node_count > 1) {
    bool across = false;
    runtime::collective_usage_check(ctx.world(), [&] { across = nccl_across_nodes(); });
    check_same_setting(ctx.world(), "DTRAIN_NCCL_ACROSS_NODES", across ? 1 : 0);
  }
  const BackendChoice choice = choose_backend(requested, topology, gpus);
  const Backend backend = choice.backend;
  const WireChoice wire = choose_wire(cross_node_wire, backend, topology, gpus);
  // Collective: a rank that finds a problem must not leave the others waiting in the backend's
  // constructor (settings passed differently to different ranks).
  runtime::collective_usage_check(ctx.world(), [&] {
    DTRAIN_USAGE_CHECK(sum16 == SixteenBitSum::kFp32 || backend == Backend::kNccl)
        << "native 16-bit sums are the nccl backend's (NCCL adds bf16 and fp16 natively), and this job's backend is "
        << backend_name(backend) << (requested == Backend::kAuto ? " (auto)" : "")
        << "; the other backends add 16-bit values in fp32";
    DTRAIN_USAGE_CHECK(gpus || backend != Backend::kNccl) << "the nccl backend needs GPUs, and this run is in CPU mode";
    DTRAIN_USAGE_CHECK(wire.dtype == DType::kF32 || wire.dtype == DType::kBF16 || wire.dtype == DType::kF16)
        << "--gradient-wire-dtype (gradient_wire_dtype) " << runtime::dtype_name(wire.dtype)
        << ": use auto, fp32, bf16 or fp16";
    DTRAIN_USAGE_CHECK(wire.dtype == DType::kF32 || carries_narrow_wire(backend))
        << "--gradient-wire-dtype (gradient_wire_dtype) " << runtime::dtype_name(wire.dtype)
        << " narrows what crosses nodes on the hierarchical or mpi-ring backend, and this job's backend is "
        << backend_name(backend) << " (" << choice.why << "); use fp32 or auto with it";
  });
  // One node: nothing crosses a network, so nothing is narrowed (as the hierarchical backend's
  // cross-node step of one node).
  const DType crossing = topology.node_count > 1 ? wire.dtype : DType::kF32;
  const bool tell_wire = topology.node_count > 1 || wire.dtype != DType::kF32;
  const RingTuning tuning = ring_tuning_from_env();
  // A flat mpi-ring across nodes keeps the ring, on simulated nodes too. The hierarchical backend
  // gets the tuning as it is: its all-reduces inside a node may take shared memory, and it keeps its
  // communicators across nodes on the ring itself (hierarchical_communicator.cc).
  RingTuning flat = tuning;
  if (topology.node_count > 1) flat.shm = false;
  DTRAIN_LOG0(kInfo) << "communicator: " << backend_name(backend) << " (" << choice.why << "), ring segment "
                     << tuning.segment_bytes << " B, " << tuning.lanes << " ring lane(s) (DTRAIN_RING_LANES), MPI "
                     << (mpi_reports_cuda_support() ? "reports" : "does not report")
                     << " CUDA support (mpi-ring device buffers: " << device_pointer_mode_name(device_pointer_mode())
                     << ")"
                     << (tell_wire
                             ? std::string(", cross-node wire ") + runtime::dtype_name(crossing) + " (" +
                                   (crossing == wire.dtype ? wire.why : "one node: nothing crosses a network") + ")"
                             : std::string())
                     << (sum16 == SixteenBitSum::kNative ? ", native 16-bit sums" : "")
                     << (backend == Backend::kMpiRing && flat.shm
                             ? ", host all-reduces from " + std::to_string(tuning.shm_min_bytes) +
                                   " B through shared memory (DTRAIN_SHM_ALLREDUCE)"
                             : "");
  switch (backend) {
    case Backend::kMpiRing:
      return std::make_unique<MpiRingCommunicator>(ctx.world(), flat, MpiRingCommunicator::Sixteen::kOneRounding,
                                                   crossing);
    case Backend::kMpi: return std::make_unique<MpiCommunicator>(ctx.world());
    case Backend::kNccl: return make_nccl_communicator(ctx.world(), sum16);
    case Backend::kHierarchical: return std::make_unique<HierarchicalCommunicator>(ctx, gpus, tuning, crossing);
    case Backend::kAuto: break;
  }
  DTRAIN_FAIL() << "unresolved backend";
}

}  // namespace dtrain::comm
