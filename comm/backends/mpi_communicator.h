#pragma once
// The "mpi" backend: the MPI library's own collectives (MPI_Allreduce and siblings). The baseline
// our ring is measured against, and a reference in tests. 16-bit data is widened to fp32 around the
// MPI call so it rounds once, like every other backend.
#include <vector>

#include "comm/backends/host_communicator.h"

namespace dtrain::comm {

class MpiCommunicator final : public HostCommunicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override { stop_worker(); }
  const char* name() const override { return "mpi"; }

 private:
  void run(const Collective& call) override;
  void all_reduce(const Collective& call);
  void reduce_scatter(const Collective& call);

  std::vector<float> scratch_;
  std::vector<float> scratch_out_;
};

}  // namespace dtrain::comm
