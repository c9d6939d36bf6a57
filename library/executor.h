#pragma once
// The data plane under name matching: runs one response's operations, on the background thread,
// the same response on every rank at the same point of the agreed order.
//
// fp32, fp16 and bf16 sums and averages, broadcasts, equal all-gathers and reduce-scatters go
// through the job's Communicator (comm/: mpi-ring on CPUs, as the factory's auto choice decides),
// so name-matched calls move their bytes like the trainer's gradients. What the Communicator does
// not do (min and max, integer and fp64 dtypes, all-to-all, all-gathers of differing counts) goes
// to MPI directly on the library's own duplicate of the world. Fused all-reduces are packed into
// one fusion buffer, reduced once and unpacked. Failures throw (runtime::Error, std::exception).
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "library/operation.h"
#include "library/request.h"

namespace dtrain::library {

class Executor {
 public:
  // `data_comm`: the world's ranks, a communicator only this executor uses.
  Executor(MPI_Comm data_comm, comm::Communicator& communicator);

  // `ops`: this rank's operations of `response`, in the response's order.
  void run(const Response& response, const std::vector<Operation*>& ops);

 private:
  void all_reduce(const std::vector<Operation*>& ops);
  void reduce_in_place(void* buffer, int64_t count, int dtype, int op);
  void broadcast(Operation& op);
  void all_gather(Operation& op, const std::vector<int64_t>& counts);
  void reduce_scatter(Operation& op);
  void all_to_all(Operation& op);

  MPI_Comm data_comm_;
  comm::Communicator& communicator_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<double> fusion_;  // the fusion buffer; doubles keep it aligned for every dtype
};

}  // namespace dtrain::library
