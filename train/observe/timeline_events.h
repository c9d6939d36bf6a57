#pragma once
// The pieces of dtrain-train's timeline (--timeline, timeline.h) that need neither MPI nor a GPU:
// the spans one rank records, the cap that keeps the file small, and their rendering as Chrome
// trace events (the JSON that Perfetto and chrome://tracing load, as Horovod's timeline).
//
// A span is one phase of one step on one track of one rank, with its begin and end in seconds on
// the steady clock (runtime::steady_seconds(); comm::Work spans and the GPU's events converted to host
// time use the same clock). Rendering makes them complete events ("ph": "X") with pid = the rank
// and tid = the track, times in microseconds from a common zero, and names the process
// ("rank R (host)") and the tracks in metadata events ("ph": "M"). Every track of the output is
// properly nested (a span lies inside or after the ones before it on its track, which both viewers
// need to stack slices): a span that overlaps another one only partly moves to an extra track of
// the same name, "(overlapping N)".
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/base/steady_seconds.h"

namespace dtrain::train {

// The timeline's clock is runtime::steady_seconds (runtime/base/steady_seconds.h), StepTimer's and
// comm::Work's.

// The tracks of a rank: its thread of the step loop, the GPU's streams, and where the gradients
// are averaged (the comm stream on a GPU, the communicator's worker thread on the CPU path).
enum class TimelineTrack : int { kStepLoop = 1, kCopyStream = 2, kComputeStream = 3, kComm = 4 };

struct TimelineSpan {
  TimelineTrack track = TimelineTrack::kStepLoop;
  const char* name = "";  // a static string: "forward", "SGD update", ...
  long step = 0;          // the global step (1-based, as in the log and the metrics file)
  double begin = 0;       // runtime::steady_seconds() seconds
  double end = 0;
  // A gradient bucket's all-reduce, or one of its phases (comm/call_trace.h): its index (rendered
  // "all-reduce bucket N", "cross-node ring bucket N").
  long bucket = -1;
  int64_t bytes = -1;
  int micro_batch = -1;  // with accumulation_steps > 1: which micro-batch of the step
  int piece = -1;        // a staged piece of a bucket's phase (rendered "D2H bucket N piece K")
};

// Global steps first..last, both included, 1-based.
struct TimelineRange {
  long first = 0;
  long last = 0;
  long steps() const { return last - first + 1; }
};

// The bounds that keep a timeline small enough to load: at most kMaxTimelineSteps steps in the
// range, at most kMaxTimelineEvents spans in the file (about 150 bytes each, so some 30 MB), and
// per rank at most kMaxTimelineSpansPerRank or its share of the file's, whichever is less. A rank
// that reaches its share drops further spans and counts them.
constexpr long kMaxTimelineSteps = 100;
constexpr size_t kMaxTimelineEvents = 200000;
constexpr size_t kMaxTimelineSpansPerRank = 20000;
size_t timeline_spans_per_rank(int world_size);

// "N:M" (steps N to M) or "N" (step N alone); a UsageError naming `flag` otherwise, and for a
// first step below 1, an end before the start or more than kMaxTimelineSteps steps.
TimelineRange parse_timeline_steps(const std::string& text, const std::string& flag);

// One rank's spans, up to its cap; not thread-safe (the step loop's thread adds them all).
class TimelineRecorder {
 public:
  TimelineRecorder(TimelineRange range, size_t max_spans) : range_(range), max_spans_(max_spans) {}
  const TimelineRange& range() const { return range_; }
  bool covers(long step) const { return step >= range_.first && step <= range_.last; }
  // Adds the span, or counts it as dropped past the cap.
  void add(const TimelineSpan& span);
  // For spans whose times come later (the GPU's events): holds room for one, or counts it as
  // dropped (false) past the cap; add_reserved() then adds it.
  bool reserve();
  void add_reserved(const TimelineSpan& span);
  const std::vector<TimelineSpan>& spans() const { return spans_; }
  size_t dropped() const { return dropped_; }

 private:
  TimelineRange range_;
  size_t max_spans_;
  size_t reserved_ = 0;
  std::vector<TimelineSpan> spans_;
  size_t dropped_ = 0;
};

// Who recorded the spans: the process is named "rank R (host)"; device: "" on the CPU path,
// else the GPU's name for the stream tracks ("GPU 0").
struct TimelineRankLabel {
  int rank = 0;
  std::string host;
  std::string device;
};

// The rank's trace events (metadata first, then its spans by track and time), as JSON values
// separated by ",\n"; times are microseconds after `zero` (runtime::steady_seconds() seconds), which must
// not be after any span's begin. Empty when there are no spans.
std::string timeline_rank_events(const std::vector<TimelineSpan>& spans, const TimelineRankLabel& label, double zero);

// The whole file: {"traceEvents": [every rank's events], "displayTimeUnit": "ms", "otherData":
// other_data}; other_data is a JSON object already.
std::string timeline_document(const std::vector<std::string>& rank_events, const std::string& other_data);

}  // namespace dtrain::train
