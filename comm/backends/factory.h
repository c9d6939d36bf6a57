#pragma once
// Creating a communicator for the world of a RankContext. What `auto` picks, and why, is
// backend_choice.h's.
#include <memory>
#include <optional>

#include "comm/backend_kind.h"
#include "comm/backends/backend_choice.h"
#include "comm/backends/nccl_backend.h"
#include "comm/communicator.h"
#include "runtime/rank/rank_context.h"

namespace dtrain::comm {

// Collective over ctx.world(). `gpus`: ranks drive GPUs (NCCL is available and buffers are on the
// device). `cross_node_wire`: the format of fp32 all-reduces between nodes, nullopt for auto
// (choose_wire); bf16 and fp16 are carried by hierarchical (its cross-node step) and mpi-ring (the
// whole flat ring, mpi_ring_communicator.h), a UsageError naming gradient_wire_dtype and the
// backend on the others; on one node nothing crosses a network and the wire stays fp32.
// `sum16`: kNative needs the nccl backend (a UsageError otherwise). Logs the choices, and why, once
// from rank 0.
std::unique_ptr<Communicator> make_communicator(Backend requested, const runtime::RankContext& ctx, bool gpus,
                                                std::optional<DType> cross_node_wire = DType::kF32,
                                                SixteenBitSum sum16 = SixteenBitSum::kFp32);

}  // namespace dtrain::comm
