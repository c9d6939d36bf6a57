#pragma once
// The "mpi-ring" backend: our own ring collectives (host_ring.h) over MPI point-to-point.
// 16-bit all-reduce runs the reduce-scatter in fp32 (widened once), rounds each rank's chunk once,
// and gathers the rounded 16-bit chunks: 1.5x the bytes of a pure 16-bit ring, but one rounding.
#include <vector>

#include "comm/host_communicator.h"
#include "comm/host_ring.h"

namespace dtrain::comm {

class MpiRingCommunicator final : public HostCommunicator {
 public:
  MpiRingCommunicator(MPI_Comm comm, RingTuning tuning);
  const char* name() const override { return "mpi-ring"; }

 private:
  void run_host(const Collective& call) override;
  void all_reduce(const Collective& call);
  void reduce_scatter(const Collective& call);
  void all_gather(const Collective& call);

  HostRing ring_;
  RingTuning tuning_;
  std::vector<float> scratch_;
};

}  // namespace dtrain::comm
