#include "runtime/rank/gpu_binding.h"

#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::runtime {
namespace {

// Fixed-size record for MPI_Allgather. The host name only labels messages (gethostname gives at
// most 255 bytes); ranks are grouped by host_index.
struct WireChoice {
  int32_t world_rank;
  int32_t host_index;
  int32_t visible_count;
  char host[256];
  char pci_bus_id[32];
};

void copy_truncated(char* out, size_t size, const std::string& text) {
  std::memset(out, 0, size);
  std::memcpy(out, text.data(), std::min(size - 1, text.size()));
}

std::vector<GpuDevice> simulated_gpus(int64_t count) {
  std::vector<GpuDevice> gpus;
  for (int i = 0; i < count; ++i) {
    std::ostringstream bus;
    bus << "sim:00:" << i;
    gpus.push_back(GpuDevice{i, "simulated GPU " + std::to_string(i), bus.str(), 0, true});
  }
  return gpus;
}

}  // namespace

std::vector<GpuDevice> visible_gpus() {
  if (const auto simulated = env_int("DTRAIN_SIMULATED_GPUS", 0, 1024)) return simulated_gpus(*simulated);
  return detail::runtime_visible_gpus();
}

int device_index_for_local_rank(int host_local_rank, int visible_count) {
  DTRAIN_CHECK(visible_count > 0) << "no visible GPU to bind";
  return host_local_rank % visible_count;
}

std::string gpu_placement_problem(const std::vector<RankGpuChoice>& choices, bool allow_sharing) {
  const RankGpuChoice* with_gpu = nullptr;
  const RankGpuChoice* without_gpu = nullptr;
  for (const RankGpuChoice& c : choices) {
    (c.visible_count > 0 ? with_gpu : without_gpu) = &c;
  }
  std::ostringstream problem;
  if (with_gpu != nullptr && without_gpu != nullptr) {
    problem << "rank " << without_gpu->world_rank << " on host " << without_gpu->host << " sees no GPU while rank "
            << with_gpu->world_rank << " on host " << with_gpu->host << " sees " << with_gpu->visible_count
            << "; every rank needs a GPU, or none (check CUDA_VISIBLE_DEVICES and the job's GPU request)";
    return problem.str();
  }
  if (with_gpu == nullptr || allow_sharing) return "";

  struct HostUse {
    std::string host;
    int ranks = 0;
    std::set<std::string> gpus;
  };
  std::map<int, HostUse> hosts;
  for (const RankGpuChoice& c : choices) {
    HostUse& use = hosts[c.host_index];
    use.host = c.host;
    ++use.ranks;
    use.gpus.insert(c.pci_bus_id);
  }
  for (const auto& [index, use] : hosts) {
    if (use.ranks > static_cast<int>(use.gpus.size())) {
      problem << "host " << use.host << " has " << use.ranks << " local ranks but only " << use.gpus.size() << " GPU"
              << (use.gpus.size() == 1 ? "" : "s")
              << " for them; start at most one rank per GPU, or pass --allow-gpu-sharing";
      return problem.str();
    }
  }
  return "";
}

std::vector<RankGpuChoice> exchange_gpu_choices(MPI_Comm world, const RankGpuChoice& mine) {
  WireChoice wire{};
  wire.world_rank = mine.world_rank;
  wire.host_index = mine.host_index;
  wire.visible_count = mine.visible_count;
  copy_truncated(wire.host, sizeof(wire.host), mine.host);
  copy_truncated(wire.pci_bus_id, sizeof(wire.pci_bus_id), mine.pci_bus_id);

  int world_size = 0;
  DTRAIN_MPI_CHECK(MPI_Comm_size(world, &world_size));
  std::vector<WireChoice> all(static_cast<size_t>(world_size));
  DTRAIN_MPI_CHECK(MPI_Allgather(&wire, sizeof(WireChoice), MPI_BYTE, all.data(), sizeof(WireChoice), MPI_BYTE, world));
  std::vector<RankGpuChoice> choices;
  for (const WireChoice& w : all) {
    RankGpuChoice c;
    c.world_rank = w.world_rank;
    c.host_index = w.host_index;
    c.host = w.host;
    c.visible_count = w.visible_count;
    c.pci_bus_id = w.pci_bus_id;
    choices.push_back(std::move(c));
  }
  return choices;
}

GpuBinding bind_gpu(const RankContext& ctx, bool allow_sharing) {
  const Topology& topo = ctx.topology();
  const std::vector<GpuDevice> gpus = visible_gpus();

  GpuBinding binding;
  RankGpuChoice mine;
  mine.world_rank = topo.world_rank;
  mine.host = process_identity().host;
  mine.visible_count = static_cast<int>(gpus.size());
  if (!gpus.empty()) {
    binding.cpu_mode = false;
    binding.device = gpus[static_cast<size_t>(device_index_for_local_rank(topo.host_local_rank, mine.visible_count))];
    mine.pci_bus_id = binding.device.pci_bus_id;
  }

  mine.host_index = topo.host_index;
  const std::vector<RankGpuChoice> choices = exchange_gpu_choices(ctx.world(), mine);

  const std::string problem = gpu_placement_problem(choices, allow_sharing);
  DTRAIN_USAGE_CHECK(problem.empty()) << problem;

  if (binding.cpu_mode) {
    DTRAIN_LOG0(kInfo) << "no GPU visible: running in CPU mode";
  } else {
    if (!binding.device.simulated) detail::set_current_device(binding.device.index);
    DTRAIN_LOG(kDebug) << "bound to GPU " << binding.device.index << " (" << binding.device.name << ", "
                       << binding.device.pci_bus_id << ")";
  }
  return binding;
}

}  // namespace dtrain::runtime
