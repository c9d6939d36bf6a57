#pragma once
// A test hook that makes the data plane fail on purpose, to prove that a failure ends the job with
// the error instead of a hang or silently diverging replicas.
//
//   DTRAIN_FAULT_INJECT=K      the K-th operation (1-based) of every host-side communicator fails
//   DTRAIN_FAULT_INJECT=K,R    ... on world rank R only
//   DTRAIN_FAULT_INJECT=K,R,stop  instead of failing, rank R stops its whole process there
//                              (SIGSTOP, as a hung node would): the stall inspector's test
//
// Host-side communicators are mpi-ring and mpi, so this also covers device buffers staged through
// them and the cross-node step of hierarchical. The operation fails on the communicator's worker
// thread, where real failures happen (after the consistency check, before any data moves): its
// Work fails with an Error naming the injection, and the streams of a staged call are released.
// Read when a communicator is constructed; unset, it costs one counter increment per operation.
#include <atomic>
#include <cstdint>
#include <string>

#include "comm/collective.h"

namespace dtrain::comm {

// DTRAIN_FAULT_INJECT_BACKWARD=S: in step S (1-based) of the host gradient synchronizer, the
// gradient report that starts a bucket's all-reduce then throws, as an error inside backward
// would, with that all-reduce still in flight. Unset: never (0).
uint64_t backward_fault_step_from_env();

// DTRAIN_FAULT_INJECT_SIGNAL=PHASE,SIGNAL[,R]: at PHASE of a program, world rank R (every rank
// if absent) sends itself SIGNAL (TERM, USR1, ... as in stop_signals). The test of the windows
// around training: a stop signal while MPI starts or while the program ends must not
// kill the rank. The phases are the program's own names ("bootstrap", "teardown" in dtrain-train).
void raise_injected_signal(const char* phase);

struct FaultPlan {
  uint64_t at_operation = 0;                     // 0: never
  int only_world_rank = -1;                      // -1: every rank
  bool stop = false;                             // stop the process (SIGSTOP) instead of failing
  const char* variable = "DTRAIN_FAULT_INJECT";  // named in the messages
};

// UsageError naming the variable on a malformed value. DTRAIN_FAULT_INJECT_TRAINER takes the same
// form and counts the trainer's own collectives (the loss all-gather, the stop agreement, the epoch
// and evaluation totals) instead of the communicators' operations.
FaultPlan fault_plan_from_env(const char* variable = "DTRAIN_FAULT_INJECT");

class FaultInjector {
 public:
  explicit FaultInjector(FaultPlan plan) : plan_(plan) {}
  // Counts an operation of `backend`; throws runtime::Error if the plan says this one fails.
  void on_operation(const char* backend, const Collective& call);
  // The same for a control-plane call named by `what` (a trainer's MPI_Allgather, say).
  void on_operation(const char* what);

 private:
  void trigger(const std::string& operation);

  FaultPlan plan_;
  std::atomic<uint64_t> operations_{0};
};

}  // namespace dtrain::comm
