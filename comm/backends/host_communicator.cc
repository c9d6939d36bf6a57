#include "comm/backends/host_communicator.h"

#include <algorithm>
#include <cstdlib>
#include <exception>

#include "comm/diagnostics/consistency_check.h"
#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"

namespace dtrain::comm {
namespace {

// Host calls up to this size run on the caller's thread when the communicator is idle: they are
// latency-bound, and handing them to the worker thread would cost more than the call.
constexpr size_t kInlineBytes = 64 * 1024;

size_t staging_piece_bytes() {
  return static_cast<size_t>(runtime::env_int("DTRAIN_STAGING_PIECE_BYTES", 4096, int64_t{1} << 34).value_or(4 << 20));
}

}  // namespace

HostCommunicator::HostCommunicator(MPI_Comm comm) : comm_(runtime::MpiComm::duplicate(comm)) {
  rank_ = comm_.rank();
  size_ = comm_.size();
  runtime::require_mpi_thread_multiple("a host-side communicator (mpi-ring, mpi) runs MPI on its own thread");
  staging_piece_bytes_ = staging_piece_bytes();
  // Ranks cutting a staged call into different pieces would run mismatched collectives.
  check_same_setting(comm_.get(), "DTRAIN_STAGING_PIECE_BYTES", staging_piece_bytes_);
}

HostCommunicator::~HostCommunicator() {
  // Queued operations run the subclass's run() on its members, which are gone by now: running
  // them here would call a pure virtual function or use freed memory. (A
  // subclass whose constructor threw never queued anything: its idle worker just stops.)
  if (!worker_.stopped() && !worker_.idle()) {
    runtime::write_log_line(
        runtime::LogLevel::kError,
        "a HostCommunicator subclass with work queued did not call stop_worker() in its destructor");
    std::abort();
  }
  worker_.stop();
}

Work HostCommunicator::submit(const Collective& call) {
  validate_call(call, size_);
  check_usable(call);
  const bool check = check_;
  if (!call.where.device) {
    auto operation = [this, call, check] {
      check_usable(call);
      StallChannel::Operation watched(stall_, name(), call);
      if (check) check_same_collective(comm_.get(), call);
      faults_.on_operation(name(), call);
      run_or_mark_unusable(call);
    };
    const size_t bytes =
        std::max(send_elements(call, size_), recv_elements(call, size_)) * runtime::dtype_size(call.dtype);
    if (bytes <= kInlineBytes) return worker_.run_inline_if_idle(std::move(operation));
    return worker_.submit(std::move(operation));
  }
  if (!staging_) staging_ = std::make_unique<DeviceStaging>(staging_piece_bytes_);
  auto check_call = [this, check](const Collective& device_call) {
    check_usable(device_call);
    StallChannel::Operation watched(stall_, name(), device_call);
    if (check) check_same_collective(comm_.get(), device_call);
    faults_.on_operation(name(), device_call);
  };
  auto run_call = [this](const Collective& c) {
    StallChannel::Operation watched(stall_, name(), c);
    run_or_mark_unusable(c);
  };
  if (takes_device_pointers()) return staging_->run_direct(worker_, call, check_call, run_call);
  return staging_->run(worker_, call, size_, rank_, check_call, run_call);
}

void HostCommunicator::run_or_mark_unusable(const Collective& call) {
  try {
    run(call);
  } catch (const std::exception& e) {
    std::lock_guard lock(unusable_mutex_);
    if (!unusable_.load()) {
      unusable_because_ = describe(call) + " failed on it: " + e.what();
      unusable_.store(true);
    }
    throw;
  }
}

void HostCommunicator::check_usable(const Collective& call) {
  if (!unusable_.load()) return;
  std::lock_guard lock(unusable_mutex_);
  DTRAIN_FAIL() << "the " << name() << " communicator on rank " << rank_ << " of " << size_
                << " can no longer be used, so " << describe(call) << " was not run: an earlier operation, "
                << unusable_because_
                << ". A failure partway may leave messages posted that this operation's would match. "
                   "End the job, or make a new communicator.";
}

}  // namespace dtrain::comm
