// dtrain-info: one table, printed by rank 0, of where every rank runs and which GPU it drives,
// plus the library versions. `mpirun -np N build/bin/dtrain-info`.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/base/cli.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/mpi/main_guard.h"
#include "runtime/mpi/mpi_gather.h"
#include "runtime/mpi/mpi_scope.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/proto/rank_info.pb.h"
#include "runtime/rank/rank_bootstrap.h"
#include "runtime/rank/rank_context.h"
#include "runtime/rank/versions.h"

namespace dtrain {
namespace {

using runtime::proto::RankInfo;

RankInfo describe_this_rank(const runtime::RankContext& ctx, const runtime::GpuBinding& binding) {
  const runtime::Topology& topo = ctx.topology();
  RankInfo info;
  info.set_world_rank(topo.world_rank);
  info.set_host(runtime::process_identity().host);
  info.set_node_index(topo.node_index);
  info.set_local_rank(topo.local_rank);
  if (!binding.cpu_mode) {
    info.set_gpu_name(binding.device.name);
    info.set_gpu_pci_bus_id(binding.device.pci_bus_id);
    info.set_gpu_index(binding.device.index);
    info.set_gpu_simulated(binding.device.simulated);
  }
  const runtime::LibraryVersions v = runtime::library_versions();
  auto* versions = info.mutable_versions();
  versions->set_dtrain(v.dtrain);
  versions->set_mpi(v.mpi);
  versions->set_nccl(v.nccl);
  versions->set_cudnn(v.cudnn);
  versions->set_cuda_runtime(v.cuda_runtime);
  versions->set_cuda_driver(v.cuda_driver);
  return info;
}

std::string device_column(const RankInfo& info) {
  if (info.gpu_name().empty()) return "CPU";
  std::ostringstream out;
  out << "GPU " << info.gpu_index() << ": " << info.gpu_name() << " (" << info.gpu_pci_bus_id() << ")";
  return out.str();
}

void print_table(const std::vector<RankInfo>& ranks, const runtime::Topology& topo) {
  std::ostringstream out;
  out << "dtrain " << ranks.front().versions().dtrain() << ": " << topo.world_size << " rank"
      << (topo.world_size == 1 ? "" : "s") << " on " << topo.node_count << " node" << (topo.node_count == 1 ? "" : "s");
  if (topo.simulated_nodes) out << " (simulated by DTRAIN_RANKS_PER_NODE)";
  out << "\n\n";

  size_t host_width = 4;
  for (const RankInfo& r : ranks) host_width = std::max(host_width, r.host().size());
  char line[512];
  std::snprintf(line, sizeof(line), "%6s  %-*s  %5s  %10s  %s\n", "rank", static_cast<int>(host_width), "host", "node",
                "local rank", "device");
  out << line;
  for (const RankInfo& r : ranks) {
    std::snprintf(line, sizeof(line), "%6d  %-*s  %5d  %10d  %s\n", r.world_rank(), static_cast<int>(host_width),
                  r.host().c_str(), r.node_index(), r.local_rank(), device_column(r).c_str());
    out << line;
  }

  const auto& v = ranks.front().versions();
  out << "\nversions (rank 0):\n"
      << "  dtrain        " << v.dtrain() << "\n"
      << "  MPI           " << v.mpi() << "\n"
      << "  NCCL          " << v.nccl() << "\n"
      << "  cuDNN         " << v.cudnn() << "\n"
      << "  CUDA runtime  " << v.cuda_runtime() << "\n"
      << "  CUDA driver   " << v.cuda_driver() << "\n";
  // Mismatched libraries across hosts are a classic cause of hangs; point them out.
  for (const RankInfo& r : ranks) {
    if (r.versions().SerializeAsString() != v.SerializeAsString()) {
      out << "  WARNING: rank " << r.world_rank() << " on " << r.host() << " reports different versions: MPI '"
          << r.versions().mpi() << "', NCCL " << r.versions().nccl() << ", cuDNN " << r.versions().cudnn()
          << ", CUDA driver " << r.versions().cuda_driver() << "\n";
    }
  }
  std::cout << out.str() << std::flush;
}

int info_main(int argc, char** argv) {
  runtime::po::options_description options("dtrain-info options");
  options.add_options()("allow-gpu-sharing", runtime::switch_value(), "allow several ranks of one host to share a GPU");
  runtime::BootstrapOptions bootstrap;
  const auto read = [&] {
    const runtime::ParsedCommandLine cli = runtime::parse_command_line(argc, argv, options);
    if (cli.help && runtime::is_world_rank_zero()) std::cout << runtime::usage("dtrain-info", options);
    bootstrap.allow_gpu_sharing = !cli.help && runtime::switch_on(cli.values, "allow-gpu-sharing");
    return !cli.help;
  };
  if (!runtime::read_before_mpi(read, &bootstrap)) return 0;
  const runtime::RankBootstrap rank(&argc, &argv, bootstrap);
  if (rank.exit_agreed()) return 0;
  const runtime::RankContext& ctx = rank.ctx();
  const runtime::GpuBinding& binding = rank.gpu();

  const std::vector<std::string> gathered =
      runtime::gather_strings(ctx.world(), describe_this_rank(ctx, binding).SerializeAsString());
  if (ctx.topology().world_rank == 0) {
    std::vector<RankInfo> ranks(gathered.size());
    for (size_t r = 0; r < gathered.size(); ++r) {
      DTRAIN_CHECK(ranks[r].ParseFromString(gathered[r])) << "rank " << r << " sent an unreadable RankInfo";
    }
    print_table(ranks, ctx.topology());
  }
  return 0;
}

}  // namespace
}  // namespace dtrain

int main(int argc, char** argv) {
  return dtrain::runtime::run_main(argc, argv, dtrain::info_main);
}
