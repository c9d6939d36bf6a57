#include "comm/host_communicator.h"

#include <algorithm>

#include "comm/consistency_check.h"
#include "runtime/core/env.h"

namespace dtrain::comm {
namespace {

// Host calls up to this size run on the caller's thread when the communicator is idle: they are
// latency-bound, and handing them to the worker thread would cost more than the call.
constexpr size_t kInlineBytes = 64 * 1024;

size_t staging_piece_bytes() {
  return static_cast<size_t>(core::env_int("DTRAIN_STAGING_PIECE_BYTES", 4096, int64_t{1} << 34).value_or(8 << 20));
}

}  // namespace

HostCommunicator::HostCommunicator(MPI_Comm comm) : comm_(core::MpiComm::duplicate(comm)) {
  rank_ = comm_.rank();
  size_ = comm_.size();
}

HostCommunicator::~HostCommunicator() = default;

Work HostCommunicator::submit(const Collective& call) {
  validate_call(call, size_);
  const bool check = check_;
  if (!call.where.device) {
    auto operation = [this, call, check] {
      if (check) check_same_collective(comm_.get(), call);
      run(call);
    };
    const size_t bytes = std::max(send_elements(call, size_), recv_elements(call, size_)) * core::dtype_size(call.dtype);
    if (bytes <= kInlineBytes) return worker_.run_inline_if_idle(std::move(operation));
    return worker_.submit(std::move(operation));
  }
  if (!staging_) staging_ = std::make_unique<DeviceStaging>(staging_piece_bytes());
  auto check_call = [this, check](const Collective& device_call) {
    if (check) check_same_collective(comm_.get(), device_call);
  };
  auto run_call = [this](const Collective& c) { run(c); };
  if (takes_device_pointers()) return staging_->run_direct(worker_, call, check_call, run_call);
  return staging_->run(worker_, call, size_, check_call, run_call);
}

}  // namespace dtrain::comm
