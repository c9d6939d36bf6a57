#include "comm/backends/backend_choice.h"

#include <sstream>

#include "runtime/base/env.h"

namespace dtrain::comm {
namespace {

// "8 ranks on 2 nodes of 4 (simulated: DTRAIN_RANKS_PER_NODE), GPUs".
std::string layout_text(const runtime::Topology& t, bool gpus) {
  std::ostringstream text;
  text << t.world_size << (t.world_size == 1 ? " rank" : " ranks") << " on " << t.node_count
       << (t.node_count == 1 ? " node" : " nodes");
  if (t.node_count > 1) {
    const bool even = t.world_size % t.node_count == 0 && t.local_size == t.world_size / t.node_count;
    text << (even ? " of " : ", uneven, this one of ") << t.local_size;
  }
  text << (t.simulated_nodes ? " (simulated: DTRAIN_RANKS_PER_NODE)" : "") << ", " << (gpus ? "GPUs" : "CPU");
  return text.str();
}

// The rule of auto for the wire, in one place.
bool auto_wire_narrows(Backend backend, const runtime::Topology& topology, bool gpus) {
  return gpus && topology.node_count > 1 && carries_narrow_wire(backend);
}

}  // namespace

bool nccl_across_nodes() {
  return runtime::env_int("DTRAIN_NCCL_ACROSS_NODES", 0, 1).value_or(0) == 1;
}

BackendChoice choose_backend(Backend requested, const runtime::Topology& topology, bool gpus) {
  const std::string layout = layout_text(topology, gpus);
  if (requested != Backend::kAuto) {
    return {requested, "requested: " + layout};
  }
  if (topology.node_count == 1) return {gpus ? Backend::kNccl : Backend::kMpiRing, "auto: " + layout};
  if (gpus && nccl_across_nodes()) {
    return {Backend::kNccl, "auto: " + layout + "; DTRAIN_NCCL_ACROSS_NODES=1: NCCL spans the nodes"};
  }
  // One rank on every node: nothing to reduce inside a node, so the hierarchical scheme is the same
  // ring across nodes behind a one-rank NCCL step and its own staging. On 4 H200 as 4 x 1 the flat
  // ring ran ResNet-50 8-9% faster (bench/results/2026-11-27_h200x4/xnode_*); at 2 x 1 the two
  // were within 0.5% (2026-11-28_h200x2/s28).
  if (topology.world_size == topology.node_count) {
    return {Backend::kMpiRing, "auto: " + layout + ": one rank a node, so our ring across the nodes, flat"};
  }
  // Across nodes the hierarchical scheme sends each byte over the network once per node instead of
  // once per rank boundary; measured on cluster/sim, CPU ranks too (bench/results/*_cpu/sim_*).
  std::string why = "auto: " + layout + ": " + (gpus ? "NCCL" : "our ring") +
                    " inside each node, our ring across nodes on each rank's shard";
  if (gpus) why += "; DTRAIN_NCCL_ACROSS_NODES=1 lets NCCL span the nodes instead";
  return {Backend::kHierarchical, why};
}

bool carries_narrow_wire(Backend backend) {
  return backend == Backend::kHierarchical || backend == Backend::kMpiRing;
}

WireChoice choose_wire(std::optional<runtime::DType> requested, Backend backend, const runtime::Topology& topology,
                       bool gpus) {
  if (requested) return {*requested, "requested"};
  const int nodes = topology.node_count;
  if (auto_wire_narrows(backend, topology, gpus)) {
    return {runtime::DType::kBF16,
            "auto: GPUs across " + std::to_string(nodes) + " nodes; --gradient-wire-dtype fp32 to keep fp32"};
  }
  const char* why = !gpus                           ? "auto: a CPU job"
                    : nodes == 1                    ? "auto: one node"
                    : !carries_narrow_wire(backend) ? "auto: the backend carries fp32 only"
                                                    : "auto";
  return {runtime::DType::kF32, why};
}

}  // namespace dtrain::comm
