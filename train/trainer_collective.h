#pragma once
// One of the trainer's own collectives (the loss all-gather, the stop agreement, the epoch and
// evaluation totals, the timeline's gather), from its start to its end: the fault hook counts it
// (and, under DTRAIN_FAULT_INJECT_TRAINER=K,R,stop, stops rank R at the K-th), then the stall
// inspector watches it, so a rank stopped or hung while the others wait in it is named.
#include "comm/diagnostics/fault_injection.h"
#include "comm/diagnostics/stall_inspector.h"

namespace dtrain::train {

class TrainerCollective {
 public:
  TrainerCollective(comm::StallChannel& channel, comm::FaultInjector& faults, const char* what)
      : watched_(counted(channel, faults, what), what) {}

 private:
  static comm::StallChannel& counted(comm::StallChannel& channel, comm::FaultInjector& faults, const char* what) {
    faults.on_operation(what);
    return channel;
  }
  comm::StallChannel::Operation watched_;
};

}  // namespace dtrain::train
