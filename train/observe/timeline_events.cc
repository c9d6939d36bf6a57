#include "train/observe/timeline_events.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>

#include "runtime/base/error.h"
#include "runtime/io/json.h"

namespace dtrain::train {
namespace {

// Nanoseconds as microseconds with three decimals, from the integer (no rounding twice).
std::string microseconds(int64_t ns) {
  char text[40];
  std::snprintf(text, sizeof(text), "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
  return text;
}

const char* category(TimelineTrack track) {
  switch (track) {
    case TimelineTrack::kStepLoop: return "host";
    case TimelineTrack::kCopyStream: return "copy";
    case TimelineTrack::kComputeStream: return "compute";
    case TimelineTrack::kComm: return "comm";
  }
  return "host";
}

std::string track_name(TimelineTrack track, const std::string& device) {
  switch (track) {
    case TimelineTrack::kStepLoop: return "step loop (host thread)";
    case TimelineTrack::kCopyStream: return "copy stream (" + device + ")";
    case TimelineTrack::kComputeStream: return "compute stream (" + device + ")";
    case TimelineTrack::kComm:
      return device.empty() ? "gradient all-reduce (comm worker thread)" : "comm stream (" + device + ")";
  }
  return "track";
}

// Metadata events name the process and its threads; sort_index keeps ranks and tracks in order.
std::string metadata(const char* what, int pid, int tid, const runtime::JsonObject& args) {
  return runtime::JsonObject()
      .text("name", what)
      .text("ph", "M")
      .integer("pid", pid)
      .integer("tid", tid)
      .raw("args", args.str())
      .str();
}

// A span placed on its track: integer nanoseconds after the zero, and the extra track it went to
// (0: the track itself) when it overlaps an earlier span only in part.
struct Placed {
  const TimelineSpan* span;
  int64_t begin;
  int64_t end;
  int lane = 0;
};

// Puts each span on the first lane of its track where it nests inside the innermost open span or
// starts after it ends (spans sorted by begin, the longer first on a tie: parents before children).
void assign_lanes(std::vector<Placed>& spans) {
  std::vector<std::vector<int64_t>> open_ends;  // per lane, the ends of the spans still open
  for (Placed& p : spans) {
    size_t lane = 0;
    for (; lane < open_ends.size(); ++lane) {
      std::vector<int64_t>& ends = open_ends[lane];
      while (!ends.empty() && ends.back() <= p.begin) ends.pop_back();
      if (ends.empty() || p.end <= ends.back()) break;
    }
    if (lane == open_ends.size()) open_ends.emplace_back();
    open_ends[lane].push_back(p.end);
    p.lane = static_cast<int>(lane);
  }
}

constexpr int kLaneStride = 10;  // extra track k of track t is tid t + 10 k

}  // namespace

size_t timeline_spans_per_rank(int world_size) {
  return std::min(kMaxTimelineSpansPerRank, kMaxTimelineEvents / static_cast<size_t>(std::max(world_size, 1)));
}

TimelineRange parse_timeline_steps(const std::string& text, const std::string& flag) {
  TimelineRange range;
  const size_t colon = text.find(':');
  auto number = [&](const std::string& part, long* out) {
    size_t used = 0;
    bool ok = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    try {
      if (ok) *out = std::stol(part, &used);
    } catch (const std::exception&) {
      ok = false;
    }
    DTRAIN_USAGE_CHECK(ok && used == part.size())
        << flag << " '" << text << "': give the global steps to record as N:M (or N), e.g. 10:12";
  };
  number(text.substr(0, colon), &range.first);
  range.last = range.first;
  if (colon != std::string::npos) number(text.substr(colon + 1), &range.last);
  DTRAIN_USAGE_CHECK(range.first >= 1) << flag << " '" << text << "': steps count from 1";
  DTRAIN_USAGE_CHECK(range.last >= range.first) << flag << " '" << text << "': the range ends before it starts";
  DTRAIN_USAGE_CHECK(range.steps() <= kMaxTimelineSteps)
      << flag << " '" << text << "': " << range.steps() << " steps; a timeline records at most " << kMaxTimelineSteps
      << " (so the file stays small enough to load)";
  return range;
}

void TimelineRecorder::add(const TimelineSpan& span) {
  if (spans_.size() + reserved_ >= max_spans_) {
    ++dropped_;
    return;
  }
  spans_.push_back(span);
}

bool TimelineRecorder::reserve() {
  if (spans_.size() + reserved_ >= max_spans_) {
    ++dropped_;
    return false;
  }
  ++reserved_;
  return true;
}

void TimelineRecorder::add_reserved(const TimelineSpan& span) {
  DTRAIN_CHECK(reserved_ > 0) << "timeline: a span added without reserving room for it";
  --reserved_;
  spans_.push_back(span);
}

std::string timeline_rank_events(const std::vector<TimelineSpan>& spans, const TimelineRankLabel& label, double zero) {
  if (spans.empty()) return {};
  std::map<TimelineTrack, std::vector<Placed>> tracks;
  for (const TimelineSpan& s : spans) {
    const auto begin = static_cast<int64_t>(std::llround((s.begin - zero) * 1e9));
    const auto end = static_cast<int64_t>(std::llround((s.end - zero) * 1e9));
    tracks[s.track].push_back(Placed{&s, std::max<int64_t>(begin, 0), std::max({end, begin, int64_t{0}})});
  }
  const int pid = label.rank;
  std::vector<std::string> events;
  events.push_back(
      metadata("process_name", pid, 0,
               runtime::JsonObject().text("name", "rank " + std::to_string(label.rank) + " (" + label.host + ")")));
  events.push_back(metadata("process_sort_index", pid, 0, runtime::JsonObject().integer("sort_index", label.rank)));
  std::vector<std::string> slices;
  for (auto& [track, placed] : tracks) {
    std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
    });
    assign_lanes(placed);
    int lanes = 0;
    for (const Placed& p : placed) lanes = std::max(lanes, p.lane + 1);
    for (int lane = 0; lane < lanes; ++lane) {
      const int tid = static_cast<int>(track) + kLaneStride * lane;
      std::string name = track_name(track, label.device);
      if (lane > 0) name += " (overlapping " + std::to_string(lane) + ")";
      events.push_back(metadata("thread_name", pid, tid, runtime::JsonObject().text("name", name)));
      events.push_back(metadata("thread_sort_index", pid, tid, runtime::JsonObject().integer("sort_index", tid)));
    }
    for (const Placed& p : placed) {
      const TimelineSpan& s = *p.span;
      runtime::JsonObject args;
      args.integer("step", s.step);
      if (s.bucket >= 0) args.integer("bucket", s.bucket);
      if (s.bytes >= 0) args.integer("bytes", s.bytes);
      if (s.micro_batch >= 0) args.integer("micro_batch", s.micro_batch);
      if (s.piece >= 0) args.integer("piece", s.piece);
      std::string name = s.name;
      if (s.bucket >= 0) name += " bucket " + std::to_string(s.bucket);
      if (s.piece >= 0) name += " piece " + std::to_string(s.piece);
      slices.push_back(runtime::JsonObject()
                           .text("name", name)
                           .text("cat", category(track))
                           .text("ph", "X")
                           .integer("pid", pid)
                           .integer("tid", static_cast<int>(track) + kLaneStride * p.lane)
                           .raw("ts", microseconds(p.begin))
                           .raw("dur", microseconds(p.end - p.begin))
                           .raw("args", args.str())
                           .str());
    }
  }
  events.insert(events.end(), slices.begin(), slices.end());
  std::string out;
  for (size_t i = 0; i < events.size(); ++i) {
    if (i > 0) out += ",\n";
    out += events[i];
  }
  return out;
}

std::string timeline_document(const std::vector<std::string>& rank_events, const std::string& other_data) {
  std::string out = "{\"traceEvents\": [\n";
  bool first = true;
  for (const std::string& events : rank_events) {
    if (events.empty()) continue;
    if (!first) out += ",\n";
    out += events;
    first = false;
  }
  out += "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": " + other_data + "}\n";
  return out;
}

}  // namespace dtrain::train
