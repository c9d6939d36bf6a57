#pragma once
// The stall inspector (Horovod's, for a runtime without a coordinator): names the ranks a blocked
// collective is waiting for, and ends a job that would otherwise wait forever.
//
// Every communicator that blocks in collectives owns a StallChannel: a private duplicate of its MPI
// communicator, for the inspector's own messages, and two counters, operations begun and finished.
// Each operation is bracketed by a StallChannel::Operation on whatever thread runs it (the
// communicator's worker, or the caller for small inline calls). That is the whole cost on the
// common path: an uncontended lock, a clock read and two counter increments; no message.
//
// One watchdog thread per process (alive while any channel exists) looks at every channel ten
// times a second. When an operation has run for longer than the warning time:
//   - shortly before it (half the warning time, at most 1 s), it asks every other rank of the
//     channel how many of the channel's operations it has begun and finished. Every rank's
//     watchdog answers from its counters (a non-blocking receive is always posted), so a rank busy
//     elsewhere or sleeping answers; a rank whose process is stopped (SIGSTOP) or dead does not;
//   - at the warning time every waiting rank logs one line: the collective (kind, count, dtype),
//     the backend and the world ranks of the communicator, how long it has waited, and the world
//     ranks that have not begun it (with how far they are), did not answer, or have already
//     finished it (a rank whose part failed, and that went on, sends nothing more for it); when
//     every rank has begun it and none has finished, it says so (the wait is then inside the
//     transfer: a slow or broken link);
//   - the warning repeats every warning period while the operation lasts.
// At the abort time the same report is logged as an error and the job ends (MPI_Abort, status 1).
// Communicators whose work runs asynchronously on a GPU (NCCL) also register a poll: the watchdog
// calls it every round, and an error it reports (ncclCommGetAsyncError) ends the job the same way,
// so a dead link does not leave a rank blocked in cudaStreamSynchronize forever.
//
// Settings: set_stall_settings (dtrain-train: --stall_warning_seconds, --stall_abort_seconds, which
// themselves default to the variables), else DTRAIN_STALL_WARNING_SECONDS /
// DTRAIN_STALL_ABORT_SECONDS (every tool), else 60 s and 600 s: a stopped rank (SIGSTOP, a hung
// driver, a dead mount) ends the job by default, after PyTorch's NCCL watchdog's ten minutes.
// 0 turns either off. Read at every round, so they may change while channels exist.
// The queries need MPI_THREAD_MULTIPLE (the watchdog calls MPI beside the other threads); below it
// the warning names the collective but not the ranks.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/collective.h"
#include "runtime/mpi/mpi_scope.h"

namespace dtrain::comm {

struct StallSettings {
  double warning_seconds = 60;  // 0: no warnings
  double abort_seconds = 600;   // 0: never abort
};

// The defaults overridden by DTRAIN_STALL_WARNING_SECONDS / DTRAIN_STALL_ABORT_SECONDS; a
// UsageError naming the variable for anything but a number of seconds in [0, 1e6].
StallSettings stall_settings_from_env();
// UsageError naming `source` for values outside [0, 1e6] seconds.
void validate_stall_settings(const StallSettings& settings, const std::string& source);
// Process-wide. Until set_stall_settings is called: stall_settings_from_env(), read at first use.
void set_stall_settings(const StallSettings& settings);
StallSettings stall_settings();

class StallChannel {
 public:
  // Collective over `comm` (duplicates it and exchanges host names). Registers with the watchdog.
  explicit StallChannel(MPI_Comm comm);
  ~StallChannel();  // unregisters; call once no operation of this channel runs any more
  StallChannel(const StallChannel&) = delete;
  StallChannel& operator=(const StallChannel&) = delete;

  // For GPU communicators: `poll` is called on the watchdog thread every round (not concurrently
  // with itself) until the channel is destroyed; a non-empty result is an asynchronous error that
  // ends the job, logged with `backend`. Set once, before the first round matters.
  void set_async_error_poll(const char* backend, std::function<std::string()> poll);

  // One operation of the channel, from its start to its end (RAII). `backend`: a string literal.
  // Operations of one channel run one at a time, in the same order on every rank.
  // The second form watches any blocking call on the channel's group (a control-plane MPI_Allgather
  // of the trainer, say); `what` is a string literal that names it in the report.
  class Operation {
   public:
    Operation(StallChannel& channel, const char* backend, const Collective& call) : channel_(channel) {
      channel_.begin(backend, &call);
    }
    Operation(StallChannel& channel, const char* what) : channel_(channel) { channel_.begin(what, nullptr); }
    ~Operation() { channel_.finished_.fetch_add(1, std::memory_order_release); }
    Operation(const Operation&) = delete;
    Operation& operator=(const Operation&) = delete;

   private:
    StallChannel& channel_;
  };

  struct Inspection;  // the watchdog's state for this channel (stall_inspector.cc)

 private:
  friend class StallWatchdog;
  void begin(const char* backend, const Collective* call);

  runtime::MpiComm comm_;  // the inspector's messages; null below MPI_THREAD_MULTIPLE
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> world_ranks_;    // channel rank -> world rank
  std::vector<std::string> hosts_;  // channel rank -> host

  std::mutex current_mutex_;  // guards the four below; taken by begin() and the watchdog
  uint64_t current_op_ = 0;   // 1-based index of the latest operation begun
  const char* current_backend_ = "";
  bool current_is_call_ = false;  // else current_backend_ is the whole description
  Collective current_call_;
  std::chrono::steady_clock::time_point current_start_;
  std::atomic<uint64_t> finished_{0};

  const char* poll_backend_ = "";
  std::function<std::string()> poll_;
  std::unique_ptr<Inspection> inspection_;  // touched by the watchdog thread only
};

}  // namespace dtrain::comm
