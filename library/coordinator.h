#pragma once
// Rank 0's side of name matching (Horovod's coordinator). Every cycle each rank's new requests
// arrive here; a name is ready once every rank has submitted it, and ready names become responses
// in the order they became ready, which every rank then executes. Ready all-reduces that agree on
// dtype, op and scale factors are fused into one response up to the fusion threshold.
//
// Names some rank has not submitted are watched with the stall inspector's settings
// (comm/diagnostics/stall_inspector.h: DTRAIN_STALL_WARNING_SECONDS, DTRAIN_STALL_ABORT_SECONDS):
// past the warning time rank 0 logs the operation and the ranks that have not submitted it (again
// every warning period); past the abort time the name becomes an error response, so every rank
// gets DTRAIN_ERR_STALLED instead of waiting forever.
//
// The negotiation phases of each name go to the timeline (timeline.h) while it is active.
//
// Join (Horovod's): a rank that submits the join has no more work. Until every rank has joined, a
// name counts as submitted by the joined ranks too: an all-reduce of host buffers runs with the
// joined ranks adding zeros (the response's stand_ins tell them what to reduce), anything else
// fails naming the joined ranks. The join itself is done once every rank has submitted it, and
// reports the rank that joined last.
//
// Single-threaded: only rank 0's background thread calls it.
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "library/request.h"
#include "library/timeline.h"

namespace dtrain::library {

class Coordinator {
 public:
  // `timeline` outlives the coordinator.
  Coordinator(int world_size, int64_t fusion_threshold_bytes, Timeline& timeline);

  // `rank`'s requests of this cycle and whether it asks to shut down.
  void add(int rank, std::vector<Request> requests, bool shutdown);
  // The responses of this cycle, in execution order; ends with kShutdown once every rank asked.
  std::vector<Response> take_responses();

 private:
  struct Pending {
    std::vector<Request> by_rank;  // by_rank[r].name empty: rank r has not submitted it
    int submitted = 0;
    uint64_t arrival = 0;  // orders the names submitted in the same cycle
    std::chrono::steady_clock::time_point first_seen;
    std::chrono::steady_clock::time_point last_warned;
  };
  using Clock = std::chrono::steady_clock;

  void add_one(int rank, Request request);
  // Ready or mismatched: `it`'s name has every rank's request, submitted or (joined) stood in for.
  void settle(std::map<std::string, Pending>::iterator it);
  int absent_joined(const Pending& pending) const;
  void join(int rank);
  void fuse_ready(std::vector<Response>* out);
  void check_stalls(std::vector<Response>* out);
  std::string missing_ranks(const Pending& pending) const;

  int world_size_;
  int64_t fusion_threshold_;
  Timeline& timeline_;
  uint64_t arrivals_ = 0;
  std::map<std::string, Pending> pending_;
  std::vector<Request> ready_;                                // every rank agrees; in the order they became ready
  std::vector<Response> errors_;                              // mismatches found this cycle
  std::map<std::string, std::vector<int64_t>> ready_counts_;  // all-gathers in ready_: each rank's count
  std::vector<bool> shutdown_;
  std::vector<bool> joined_;  // ranks whose join is in flight
  int last_joined_ = -1;
  std::map<std::string, Request> stand_ins_;  // names in ready_ that joined ranks did not submit
};

}  // namespace dtrain::library
