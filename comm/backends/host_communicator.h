#pragma once
// The shared frame of the backends whose data plane runs on the host (mpi-ring, mpi): a private
// duplicate of the MPI communicator, a CommWorker thread that runs operations in order, the
// consistency check, and staging of device buffers through pinned host memory.
// A subclass implements run(), called on the worker thread with host buffers, or with device buffers
// when it takes_device_pointers() (a CUDA-aware MPI).
//
// MPI is called from the worker thread beside the caller's, so the constructor requires
// MPI_THREAD_MULTIPLE (runtime::require_mpi_thread_multiple). Every rank must use the same staging
// piece size (DTRAIN_STAGING_PIECE_BYTES); the constructor checks, naming both values.
// Every operation is watched by the stall inspector (stall_inspector.h) on the thread that runs it.
// A subclass must call stop_worker() first thing in its destructor: queued operations run
// subclass code (run()) and use subclass members, so the worker must finish them and stop before
// any of that is destroyed. The base destructor ends the process with an error saying so if it
// finds work still queued (instead of a race ending in "pure virtual method called").
//
// Once run() has thrown, the communicator is unusable on that rank: an operation cut off partway
// may leave sends and receives posted, which the next operation's messages would match (wrong
// data, or a wait that never ends). Every later operation on it, queued or submitted, fails with
// an Error naming the first failure; end the job, or make a new communicator, as Horovod's users
// restart after a HorovodInternalError. A failure before run() (the consistency check, an injected
// fault) moves no data and leaves it usable.
#include <mpi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "comm/communicator.h"
#include "comm/diagnostics/fault_injection.h"
#include "comm/diagnostics/stall_inspector.h"
#include "comm/host/comm_worker.h"
#include "comm/host/device_staging.h"
#include "runtime/mpi/mpi_scope.h"

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
  // Runs what is queued, then stops the worker thread. Idempotent.
  void stop_worker() { worker_.stop(); }

 private:
  // run(call), marking the communicator unusable if it throws.
  void run_or_mark_unusable(const Collective& call);
  // Throws the Error that says why the communicator is unusable, naming `call`, if it is.
  void check_usable(const Collective& call);

  runtime::MpiComm comm_;
  StallChannel stall_{comm_.get()};
  int rank_ = 0;
  int size_ = 1;
  bool check_ = true;
  size_t staging_piece_bytes_ = 0;
  FaultInjector faults_{fault_plan_from_env()};
  std::unique_ptr<DeviceStaging> staging_;  // created on the first device call
  std::atomic<bool> unusable_{false};
  std::mutex unusable_mutex_;
  std::string unusable_because_;  // the first failure of run(), under unusable_mutex_
  CommWorker worker_;             // last member: its thread must stop before the rest is destroyed
};

}  // namespace dtrain::comm
