#pragma once
// The shared frame of the backends whose data plane runs on the host (mpi-ring, mpi): a private
// duplicate of the MPI communicator, a CommWorker thread that runs operations in order, the
// consistency check, and staging of device buffers through pinned host memory.
// A subclass implements run(), called on the worker thread with host buffers, or with device buffers
// when it takes_device_pointers() (a CUDA-aware MPI).
#include <mpi.h>

#include <memory>

#include "comm/comm_worker.h"
#include "comm/communicator.h"
#include "comm/device_staging.h"
#include "runtime/core/mpi_scope.h"

namespace dtrain::comm {

class HostCommunicator : public Communicator {
 public:
  explicit HostCommunicator(MPI_Comm comm);
  ~HostCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Work submit(const Collective& call) override;
  void set_consistency_check(bool enabled) override { check_ = enabled; }

 protected:
  // Runs `call` to completion. Called on the worker thread only. Its buffers are host memory, or
  // device memory (call.where.device) if takes_device_pointers(); then run() must not use the
  // caller's stream, which is held until run() returns.
  virtual void run(const Collective& call) = 0;
  virtual bool takes_device_pointers() const { return false; }
  MPI_Comm mpi_comm() const { return comm_.get(); }

 private:
  core::MpiComm comm_;
  int rank_ = 0;
  int size_ = 1;
  bool check_ = true;
  std::unique_ptr<DeviceStaging> staging_;  // created on the first device call
  CommWorker worker_;  // last member: its thread must stop before the rest is destroyed
};

}  // namespace dtrain::comm
