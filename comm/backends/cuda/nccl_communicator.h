#pragma once
// The "nccl" backend: NCCL on device buffers. Bootstrapped by an MPI broadcast of the unique id
// over the given communicator (one NCCL communicator per MPI communicator: world, node or
// cross-node, as the caller needs). Device buffers only; calls enqueue on the caller's stream.
// 16-bit all-reduce and reduce-scatter reduce in fp32 (widen, fp32 reduce-scatter, round once,
// 16-bit all-gather), or, with SixteenBitSum::kNative, in NCCL's native 16-bit reductions (half the
// bytes, one rounding per step: factory.h). On an NCCL error the communicator is aborted (ncclCommAbort) before the
// error is thrown, so peers fail instead of waiting. The stall inspector's watchdog polls
// ncclCommGetAsyncError: an asynchronous error (a dead link, a failed peer) aborts the communicator
// and ends the job, instead of leaving kernels, and the host waiting on them, blocked forever.
#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <mutex>

#include "comm/backend_kind.h"
#include "comm/communicator.h"
#include "comm/diagnostics/stall_inspector.h"
#include "runtime/mpi/mpi_scope.h"

namespace dtrain::comm {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `comm`; the current CUDA device must already be bound. Every rank of `comm`
  // must pass the same sum16 (checked: a UsageError naming both values otherwise).
  explicit NcclCommunicator(MPI_Comm comm, SixteenBitSum sum16 = SixteenBitSum::kFp32);
  ~NcclCommunicator() override;

  const char* name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Work submit(const Collective& call) override;
  void set_consistency_check(bool enabled) override { check_ = enabled; }

  ncclComm_t raw() const { return nccl_; }

 private:
  void all_reduce(const Collective& call);
  void reduce_scatter(const Collective& call);
  // Runs an NCCL call; on failure aborts the communicator and throws NcclError.
  void checked(ncclResult_t result, const char* what);
  // On the watchdog thread: "" or the asynchronous error's text (the communicator is then aborted).
  std::string poll_async_error();

  runtime::MpiComm control_;  // consistency checks and barriers
  std::mutex nccl_mutex_;     // nccl_'s abort and destruction against the watchdog's poll
  ncclComm_t nccl_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  SixteenBitSum sum16_;
  bool check_ = true;
  std::atomic<bool> aborted_{false};
  // Last member: it unregisters (no more polls) before the members the poll uses are destroyed.
  StallChannel stall_{control_.get()};
};

}  // namespace dtrain::comm
