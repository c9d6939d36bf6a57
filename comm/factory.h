#pragma once
// Choosing and creating a communicator for the world of a RankContext.
//   auto: several nodes -> hierarchical; one node with GPUs -> nccl; one CPU node -> mpi-ring.
#include <memory>
#include <string_view>

#include "comm/communicator.h"
#include "runtime/core/rank_context.h"

namespace dtrain::comm {

enum class Backend { kAuto, kMpiRing, kMpi, kNccl, kHierarchical };

// How a bf16 or fp16 reduction adds:
//   kFp32:   widened to fp32, reduced in fp32, rounded once (comm/host/wide_reduction.h). Every
//            backend. Costs twice the bytes on the wire of a 16-bit sum.
//   kNative: in the buffers' own type, as NCCL reduces 16-bit data natively (and as PyTorch DDP's
//            bf16 compression hook does): one rounding per step of NCCL's ring or tree, so about
//            log2(ranks) to ranks roundings instead of one. The nccl backend only.
enum class SixteenBitSum { kFp32, kNative };
const char* sixteen_bit_sum_name(SixteenBitSum sum);
// "fp32", "native"; UsageError naming `source` otherwise.
SixteenBitSum parse_sixteen_bit_sum(std::string_view text, std::string_view source);

const char* backend_name(Backend backend);
// "auto", "mpi-ring", "mpi", "nccl", "hierarchical"; UsageError naming `source` otherwise.
Backend parse_backend(std::string_view text, std::string_view source);

// What `auto` means for this job. Every rank gets the same answer (node count and GPU mode are
// agreed job-wide by RankContext and bind_gpu).
Backend resolve_backend(Backend requested, const core::Topology& topology, bool gpus);

// Collective over ctx.world(). `gpus`: ranks drive GPUs (NCCL is available and buffers are on the
// device). `cross_node_wire`: the hierarchical backend's cross-node format (hierarchical_communicator.h);
// other backends take fp32 only (a UsageError otherwise). `sum16`: kNative needs the nccl backend
// (a UsageError otherwise). Logs the choice once, from rank 0.
std::unique_ptr<Communicator> make_communicator(Backend requested, const core::RankContext& ctx, bool gpus,
                                                DType cross_node_wire = DType::kF32,
                                                SixteenBitSum sum16 = SixteenBitSum::kFp32);

// The nccl backend over any MPI communicator; a UsageError in builds without CUDA.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, SixteenBitSum sum16 = SixteenBitSum::kFp32);

}  // namespace dtrain::comm
