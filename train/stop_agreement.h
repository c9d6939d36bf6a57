#pragma once
// The ranks' agreement on stopping at a stop signal (runtime/rank/stop_signals.h): the handler
// only records the signal on the rank that got it, and every rank must stop at the same step, or
// the ones still training wait forever in the next gradient all-reduce.
//
// Each step every rank posts its flag in a non-blocking MPI_Iallreduce(MAX) and completes the one
// it posted a step earlier, so no rank waits for the others' flags: the ranks stop together at
// most two steps after the signal. Every call is collective over the world (the same calls on
// every rank, in the same order) and watched as a trainer collective (trainer_collective.h).
// Called from the step loop's thread only; not thread-safe.
#include <mpi.h>

#include <string>

#include "comm/diagnostics/fault_injection.h"
#include "comm/diagnostics/stall_inspector.h"

namespace dtrain::train {

class StopAgreement {
 public:
  StopAgreement(MPI_Comm world, comm::StallChannel& stall, comm::FaultInjector& faults)
      : world_(world), stall_(stall), faults_(faults) {}
  // The posted all-reduce writes into this object.
  StopAgreement(const StopAgreement&) = delete;
  StopAgreement& operator=(const StopAgreement&) = delete;

  // Before the first step, blocking: a signal that came while MPI started, the data opened or a
  // checkpoint loaded stops every rank at once.
  bool agreed_before_training();
  // Once per step: true on every rank, at the same step, when a signal reached any rank. After
  // true, call it no more.
  bool agreed();
  // Completes the agreement posted last, if any (every rank posted it, so it cannot block for
  // long). Call when the step loop is over.
  void finish();
  // Where the signal came from, for the log: its name on the rank that got it, else "on another
  // rank".
  std::string source() const;
  // How many steps (calls of agreed()) ago this rank first posted its signal; -1 when the signal
  // came to another rank only. The bound the agreement promises (at most two) is measured from
  // there: the time a launcher takes to relay a signal to the ranks is not ours.
  int steps_since_signal() const { return noticed_call_ < 0 ? -1 : calls_ - noticed_call_; }

 private:
  MPI_Comm world_;
  comm::StallChannel& stall_;
  comm::FaultInjector& faults_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int mine_ = 0;           // the signal this rank got (0: none) when it posted its flag
  int any_ = 0;            // the largest over the ranks
  int calls_ = 0;          // of agreed()
  int noticed_call_ = -1;  // the call that first posted this rank's signal
};

}  // namespace dtrain::train
