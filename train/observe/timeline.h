#pragma once
// dtrain-train's timeline (--timeline FILE --timeline-steps N:M): what every rank did in global
// steps N to M, as one Chrome trace JSON file that Perfetto (ui.perfetto.dev) and chrome://tracing
// open. Like Horovod's timeline, one merged file: rank 0 gathers the other ranks' spans at the end
// of the range and writes FILE atomically (runtime/io/atomic_file.h).
//
// Per rank (one process "rank R (host)" in the viewer), the tracks: the step loop's thread (step,
// data wait, loss read-back, checkpoint write; on the CPU path also forward, backward, the wait
// for the last gradient buckets and the SGD update, all host times), and on a GPU its copy stream
// (H2D copy), compute stream (forward, backward, SGD update) and comm stream (each bucket's
// all-reduce), timed by CUDA events on those streams; on the CPU path the communicator's worker
// thread (each bucket's all-reduce as it really ran there, comm::Work::span). Inside each bucket,
// the phases its backend reports (comm/call_trace.h: the hierarchical backend's intra-node and
// cross-node steps, the staged pieces' copies and host ring).
//
// Clocks: every rank's times are its steady clock; the GPU's events are turned into it at the end
// of the range (one event wait, after step M). When the file is written the ranks pass a barrier
// and each takes that moment as its common point, so ranks line up to within the barrier's exit
// skew (microseconds inside a node, tens of microseconds across nodes).
//
// Cost: outside the range, one comparison per step. Inside, a few clock reads per step (CPU) or
// timing events recorded on the streams (GPU); the host never waits for the GPU inside a step.
#include <memory>
#include <string>

#include "comm/diagnostics/fault_injection.h"
#include "comm/diagnostics/stall_inspector.h"
#include "runtime/rank/rank_context.h"
#include "train/config/resolved_config.h"
#include "train/observe/timeline_events.h"

namespace dtrain::train {

class Timeline {
 public:
  // Records nothing when config.fields.timeline() is empty. device: "" on the CPU path, "GPU N"
  // on a GPU (names its stream tracks).
  Timeline(const ResolvedConfig& config, const runtime::RankContext& ctx, std::string device);
  bool enabled() const { return recorder_ != nullptr; }

  // Before training, on every rank, inside a collective usage check: a range that ends after the
  // run's last global step (`last_step`, set by what `last_why` says) or before its first one
  // (`first_step`, after a resume) is a UsageError naming --timeline-steps; rank 0 also makes
  // FILE's directory and checks that it can write there.
  void check_run(long first_step, long last_step, const std::string& last_why);

  // The recorder for global step `step` while the range covers it and the file is not written
  // yet; nullptr otherwise.
  TimelineRecorder* recorder_for(long step) {
    return recorder_ && !written_ && recorder_->covers(step) ? recorder_.get() : nullptr;
  }
  // Spans were recorded and the file is not written yet.
  bool pending() const { return recorder_ && !written_ && started_; }
  void mark_started() { started_ = true; }
  long last_step() const { return recorder_ ? recorder_->range().last : 0; }

  // Collective over the world (watched as a trainer collective): the clocks lined up, every
  // rank's spans gathered to rank 0, which writes FILE and logs it. `ending`: "" when the range
  // ran to its end, else why it ended early (a stop signal), recorded in the file.
  void write(comm::StallChannel& stall, comm::FaultInjector& faults, const std::string& ending);
  // Not collective, never throws: after an error inside the range this rank writes its own spans
  // (the others may be gone): rank 0 to FILE, rank R to FILE with ".rank-R" before ".json".
  // The GPU's spans whose events were not yet turned into times are not in it.
  void write_after_error() noexcept;

 private:
  std::string other_data(int ranks, long spans, long dropped, const std::string& ending) const;

  std::string path_;
  std::string steps_text_;
  const runtime::RankContext& ctx_;
  TimelineRankLabel label_;
  std::unique_ptr<TimelineRecorder> recorder_;
  bool started_ = false;
  bool written_ = false;
};

// FILE for rank 0, FILE with ".rank-R" before its ".json" (or at its end) for rank R.
std::string timeline_rank_path(const std::string& path, int rank);

}  // namespace dtrain::train
