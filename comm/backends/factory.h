#pragma once
// Choosing and creating a communicator for the world of a RankContext.
//   auto: several nodes -> hierarchical; one node with GPUs -> nccl; one CPU node -> mpi-ring.
#include <memory>

#include "comm/backend_kind.h"
#include "comm/backends/nccl_backend.h"
#include "comm/communicator.h"
#include "runtime/rank/rank_context.h"

namespace dtrain::comm {

// What `auto` means for this job. Every rank gets the same answer (node count and GPU mode are
// agreed job-wide by RankContext and bind_gpu).
Backend resolve_backend(Backend requested, const runtime::Topology& topology, bool gpus);

// Collective over ctx.world(). `gpus`: ranks drive GPUs (NCCL is available and buffers are on the
// device). `cross_node_wire`: the hierarchical backend's cross-node format (hierarchical_communicator.h);
// other backends take fp32 only (a UsageError otherwise). `sum16`: kNative needs the nccl backend
// (a UsageError otherwise). Logs the choice once, from rank 0.
std::unique_ptr<Communicator> make_communicator(Backend requested, const runtime::RankContext& ctx, bool gpus,
                                                DType cross_node_wire = DType::kF32,
                                                SixteenBitSum sum16 = SixteenBitSum::kFp32);

}  // namespace dtrain::comm
