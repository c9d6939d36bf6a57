#pragma once
// What `--backend auto` and `--gradient-wire-dtype auto` mean for a job, decided here only, each
// with the reason the communicator's log line gives.
//
// Backend, auto:
//   one node:      nccl with GPUs, mpi-ring on CPUs;
//   several nodes: hierarchical (NCCL, or our ring on CPUs, inside each node; our ring across nodes
//                  on each rank's shard), so NCCL never spans nodes; mpi-ring when every node has
//                  one rank (the same ring across nodes, without the steps inside a node); unless
//                  DTRAIN_NCCL_ACROSS_NODES=1 says the nodes share a fabric NCCL can use (InfiniBand,
//                  RoCE), and a GPU job then takes nccl across nodes, as Horovod and PyTorch DDP do
//                  by default.
// Cross-node wire, auto: bf16 where GPU gradients cross nodes over a backend that narrows them
// (hierarchical, mpi-ring); fp32 otherwise (CPU jobs, one node, mpi, nccl). An explicit fp32, bf16
// or fp16 is kept. The GPU default stands only while multi-node convergence holds it (Fashion-MNIST
// on simulated nodes against one node): the rule is auto_wire_narrows() alone, to switch in one place.
//
// Every rank gets the same answers when it has the same environment (node count and GPU mode are
// agreed job-wide by RankContext and bind_gpu; make_communicator checks DTRAIN_NCCL_ACROSS_NODES).
#include <optional>
#include <string>

#include "comm/backend_kind.h"
#include "runtime/memory/dtype.h"
#include "runtime/rank/topology.h"

namespace dtrain::comm {

struct BackendChoice {
  Backend backend = Backend::kMpiRing;
  std::string why;  // "auto: 8 ranks on 2 nodes, GPUs: ..." or "requested: ..."
};

// DTRAIN_NCCL_ACROSS_NODES: 1 lets auto take NCCL across nodes; 0 or unset: it does not. A
// UsageError naming the variable on any other value.
bool nccl_across_nodes();

BackendChoice choose_backend(Backend requested, const runtime::Topology& topology, bool gpus);
inline Backend resolve_backend(Backend requested, const runtime::Topology& topology, bool gpus) {
  return choose_backend(requested, topology, gpus).backend;
}

// Whether `backend` narrows what crosses nodes (gradient_wire_dtype bf16 or fp16).
bool carries_narrow_wire(Backend backend);

struct WireChoice {
  runtime::DType dtype = runtime::DType::kF32;
  std::string why;  // "auto: GPUs across 2 nodes; --gradient-wire-dtype fp32 to keep fp32", "requested"
};

// gradient_wire_dtype for a job on `backend` (resolved, not kAuto): `requested` nullopt is auto.
WireChoice choose_wire(std::optional<runtime::DType> requested, Backend backend, const runtime::Topology& topology,
                       bool gpus);

}  // namespace dtrain::comm
