#pragma once
// One rank per GPU: each rank takes the GPU at index (host-local rank mod visible GPUs), where
// "visible" honours CUDA_VISIBLE_DEVICES. Two ranks on one GPU is an error naming both counts,
// unless sharing was allowed (--allow-gpu-sharing). Without any GPU the run is in CPU mode.
//
// A launcher that masks devices per rank (Slurm --gpus-per-task=1: each rank sees one GPU as
// index 0) is recognised because the ranks' PCI bus ids differ; sharing is decided by bus id, not
// by counting indices.
//
// DTRAIN_SIMULATED_GPUS=N pretends N GPUs are visible on every host, for exercising these rules
// on CPU-only machines; computation stays on the CPU.
#include <cstddef>
#include <string>
#include <vector>

#include "runtime/rank/rank_context.h"

namespace dtrain::runtime {

struct GpuDevice {
  int index = -1;          // CUDA runtime index within the visible set
  std::string name;        // "NVIDIA H200"
  std::string pci_bus_id;  // "0000:19:00.0"; unique per physical GPU on a host
  size_t total_memory = 0;
  bool simulated = false;
};

// GPUs this process can see: DTRAIN_SIMULATED_GPUS if set, else the CUDA runtime's list (empty
// in builds without CUDA or on hosts without a driver).
std::vector<GpuDevice> visible_gpus();

// What one rank chose, as exchanged between ranks.
struct RankGpuChoice {
  int world_rank = 0;
  int host_index = 0;  // physical host, by lowest world rank
  std::string host;
  int visible_count = 0;
  std::string pci_bus_id;  // empty in CPU mode
};

int device_index_for_local_rank(int host_local_rank, int visible_count);

// Collective over `world`: every rank's choice, in world-rank order. Ranks are grouped into hosts
// by `host_index` (the shared-memory host key of Topology), never by name: host names are only for
// messages and travel whole.
std::vector<RankGpuChoice> exchange_gpu_choices(MPI_Comm world, const RankGpuChoice& mine);

// Empty when the placement is acceptable, else the one-line reason: some ranks with GPUs and some
// without, or a host whose ranks outnumber its distinct GPUs while sharing is not allowed.
std::string gpu_placement_problem(const std::vector<RankGpuChoice>& choices, bool allow_sharing);

struct GpuBinding {
  bool cpu_mode = true;
  GpuDevice device;  // valid when !cpu_mode
};

// Collective over ctx.world(). Picks, checks (a UsageError on every rank when the placement is
// wrong) and makes the device current. Logs the choice, or that the run is in CPU mode.
GpuBinding bind_gpu(const RankContext& ctx, bool allow_sharing);

namespace detail {
// The CUDA runtime's visible devices (gpu_discovery_cuda.cc), or none (gpu_discovery_cpu.cc).
std::vector<GpuDevice> runtime_visible_gpus();
// Makes `device` current for the CUDA runtime (no-op without CUDA).
void set_current_device(int device);
}  // namespace detail

}  // namespace dtrain::runtime
