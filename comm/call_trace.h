#pragma once
// Where one collective call spends its time, phase by phase, for dtrain-train's timeline: a
// caller that wants to know puts a CallTrace in Collective::trace, and the backends that have
// phases worth seeing report them (the hierarchical all-reduce: intra-node reduce-scatter,
// cross-node ring, intra-node all-gather; the staged device path: each piece's copy to the host,
// host ring and copy back). Other backends report nothing. A null trace (the default) costs one
// pointer test per phase.
//
// Two kinds of report, because a phase runs either on a host thread or on a device stream:
//   host_phase: the phase ran on a host thread, between `begin` and `end` (steady seconds,
//     runtime::steady_seconds()). Called on the thread that ran it (often the communicator's
//     worker, after the call was made), so implementations must be thread-safe and must not call
//     CUDA (device_staging.h says why the worker never does).
//   device_phase: the phase is enqueued on the device stream `stream` (a cudaStream_t): called on
//     the calling thread right before its work is enqueued (after = false) and right after
//     (after = true), so the caller can record CUDA events around it. Calls pair up and nest.
#include <cstdint>

namespace dtrain::comm {

// The phases' names (static strings, so spans can keep the pointer).
inline constexpr const char* kPhaseIntraReduceScatter = "intra-node reduce-scatter";
inline constexpr const char* kPhaseIntraAllGather = "intra-node all-gather";
inline constexpr const char* kPhaseIntraAllReduce = "intra-node all-reduce";  // uneven nodes
inline constexpr const char* kPhaseIntraBroadcast = "intra-node broadcast";   // uneven nodes
inline constexpr const char* kPhaseCrossNode = "cross-node ring";
inline constexpr const char* kPhaseDeviceToHost = "D2H";    // a staged piece's copy to the host
inline constexpr const char* kPhaseHostRing = "host ring";  // the host collective on a staged piece
inline constexpr const char* kPhaseHostToDevice = "H2D";    // a staged piece's copy back

struct CallPhase {
  const char* name = "";
  int64_t bytes = -1;  // what the phase moved (this rank's buffer, in the phase's dtype)
  int piece = -1;      // a staged piece's index within its call; -1 for the call's own phases
  double begin = 0;    // host_phase only
  double end = 0;
};

class CallTrace {
 public:
  virtual ~CallTrace() = default;
  virtual void host_phase(const CallPhase& phase) = 0;
  virtual void device_phase(const CallPhase& phase, void* stream, bool after) = 0;
};

}  // namespace dtrain::comm
