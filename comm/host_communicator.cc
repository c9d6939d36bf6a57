#include "comm/host_communicator.h"

#include "comm/consistency_check.h"

namespace dtrain::comm {

HostCommunicator::HostCommunicator(MPI_Comm comm) : comm_(core::MpiComm::duplicate(comm)) {
  rank_ = comm_.rank();
  size_ = comm_.size();
}

HostCommunicator::~HostCommunicator() = default;

Work HostCommunicator::submit(const Collective& call) {
  validate_call(call, size_);
  const bool check = check_;
  if (!call.where.device) {
    return worker_.submit([this, call, check] {
      if (check) check_same_collective(comm_.get(), call);
      run_host(call);
    });
  }
  if (!staging_) staging_ = std::make_unique<DeviceStaging>();
  return staging_->run(worker_, call, size_, [this, check](const Collective& host_call) {
    if (check) check_same_collective(comm_.get(), host_call);
    run_host(host_call);
  });
}

}  // namespace dtrain::comm
