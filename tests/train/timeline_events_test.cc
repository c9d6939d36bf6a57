// The timeline's pure parts: the --timeline-steps range and its errors, the cap
// per rank, the path of a rank's own file, and the rendering: microseconds from integer
// nanoseconds, metadata naming the process and its tracks, times sorted per track, and a span that
// overlaps another only partly moved to an extra track so that every track nests properly.
#include "train/observe/timeline_events.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "train/observe/timeline.h"

namespace dtrain::train {
namespace {

std::string usage_error(const std::string& text) {
  try {
    parse_timeline_steps(text, "--timeline-steps");
  } catch (const runtime::UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(TimelineSteps, ParsesRangesAndSingleSteps) {
  const TimelineRange r = parse_timeline_steps("10:12", "--timeline-steps");
  EXPECT_EQ(r.first, 10);
  EXPECT_EQ(r.last, 12);
  EXPECT_EQ(r.steps(), 3);
  const TimelineRange one = parse_timeline_steps("7", "--timeline-steps");
  EXPECT_EQ(one.first, 7);
  EXPECT_EQ(one.last, 7);
  EXPECT_EQ(parse_timeline_steps("1:100", "--timeline-steps").steps(), kMaxTimelineSteps);
}

TEST(TimelineSteps, BadRangesNameTheFlag) {
  for (const char* bad : {"", ":", "a:b", "3:", ":3", "1:2:3", "-1:2", "2:x", "1.5:3", "99999999999999999999:1"}) {
    EXPECT_NE(
        usage_error(bad).find("--timeline-steps '" + std::string(bad) + "': give the global steps to record as N:M"),
        std::string::npos)
        << bad << ": " << usage_error(bad);
  }
  EXPECT_NE(usage_error("0:3").find("steps count from 1"), std::string::npos);
  EXPECT_NE(usage_error("5:3").find("the range ends before it starts"), std::string::npos);
  EXPECT_NE(usage_error("1:101").find("101 steps; a timeline records at most 100"), std::string::npos);
}

TEST(TimelineRecorder, KeepsItsCapAndCountsWhatItDrops) {
  EXPECT_EQ(timeline_spans_per_rank(1), kMaxTimelineSpansPerRank);
  EXPECT_EQ(timeline_spans_per_rank(64), kMaxTimelineEvents / 64);
  EXPECT_LE(timeline_spans_per_rank(1000) * 1000, kMaxTimelineEvents);
  TimelineRecorder recorder({3, 5}, 3);
  EXPECT_FALSE(recorder.covers(2));
  EXPECT_TRUE(recorder.covers(3));
  EXPECT_TRUE(recorder.covers(5));
  EXPECT_FALSE(recorder.covers(6));
  recorder.add({TimelineTrack::kStepLoop, "step", 3, 1.0, 2.0});
  EXPECT_TRUE(recorder.reserve());  // a GPU span whose times come later holds its room
  recorder.add({TimelineTrack::kStepLoop, "step", 4, 2.0, 3.0});
  recorder.add({TimelineTrack::kStepLoop, "step", 5, 3.0, 4.0});  // past the cap
  EXPECT_FALSE(recorder.reserve());
  recorder.add_reserved({TimelineTrack::kComm, "all-reduce", 3, 1.5, 1.7, 0, 400});
  EXPECT_EQ(recorder.spans().size(), 3u);
  EXPECT_EQ(recorder.dropped(), 2u);
}

TEST(TimelineRankPath, RankZeroTakesTheFileOthersTheirOwn) {
  EXPECT_EQ(timeline_rank_path("out/trace.json", 0), "out/trace.json");
  EXPECT_EQ(timeline_rank_path("out/trace.json", 3), "out/trace.rank-3.json");
  EXPECT_EQ(timeline_rank_path("trace", 1), "trace.rank-1.json");
}

// The complete events ("ph": "X") of `json` on track `tid`, in file order, as name@ts+dur.
std::vector<std::string> slices(const std::string& json, int tid) {
  std::vector<std::string> out;
  const std::regex event("\\{\"name\": \"([^\"]+)\", \"cat\": \"[a-z]+\", \"ph\": \"X\", \"pid\": 2, \"tid\": " +
                         std::to_string(tid) + ", \"ts\": ([0-9.]+), \"dur\": ([0-9.]+), \"args\": \\{[^}]*\\}\\}");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), event); it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1].str() + "@" + (*it)[2].str() + "+" + (*it)[3].str());
  }
  return out;
}

TEST(TimelineRendering, ChromeTraceEventsPerRankAndTrack) {
  const double zero = 1000.0;
  const std::vector<TimelineSpan> spans = {
      {TimelineTrack::kComputeStream, "backward", 3, zero + 0.000200, zero + 0.000500},
      {TimelineTrack::kComputeStream, "forward", 3, zero + 0.0000015, zero + 0.000200},
      {TimelineTrack::kComm, "all-reduce", 3, zero + 0.000300, zero + 0.000450, 1, 1024},
      {TimelineTrack::kComm, "all-reduce", 3, zero + 0.000100, zero + 0.000350, 0, 2048},  // overlaps bucket 1
      {TimelineTrack::kStepLoop, "step", 3, zero, zero + 0.001},
      {TimelineTrack::kStepLoop, "data wait", 3, zero, zero + 0.0001},
  };
  const std::string json = timeline_rank_events(spans, {2, "node7", "GPU 1"}, zero);
  EXPECT_NE(json.find("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 2, \"tid\": 0, \"args\": {\"name\": "
                      "\"rank 2 (node7)\"}}"),
            std::string::npos)
      << json;
  for (const char* track : {"step loop (host thread)", "compute stream (GPU 1)", "comm stream (GPU 1)",
                            "comm stream (GPU 1) (overlapping 1)"}) {
    EXPECT_NE(json.find(std::string("\"args\": {\"name\": \"") + track + "\"}"), std::string::npos) << track;
  }
  EXPECT_EQ(json.find("copy stream"), std::string::npos) << "a track without spans is not named";
  // Sorted by time per track, the enclosing span first on a tie; microseconds with three decimals.
  EXPECT_EQ(slices(json, 1), (std::vector<std::string>{"step@0.000+1000.000", "data wait@0.000+100.000"}));
  EXPECT_EQ(slices(json, 3), (std::vector<std::string>{"forward@1.500+198.500", "backward@200.000+300.000"}));
  // Bucket 1 overlaps bucket 0 only in part: it moves to the extra track 4 + 10.
  EXPECT_EQ(slices(json, 4), (std::vector<std::string>{"all-reduce bucket 0@100.000+250.000"}));
  EXPECT_EQ(slices(json, 14), (std::vector<std::string>{"all-reduce bucket 1@300.000+150.000"}));
  EXPECT_NE(json.find("\"args\": {\"step\": 3, \"bucket\": 1, \"bytes\": 1024}"), std::string::npos);
  EXPECT_EQ(timeline_rank_events({}, {0, "h", ""}, 0), "");
}

// A bucket's phases (comm/call_trace.h) nest inside its all-reduce on the comm track, named with
// the bucket and, for a staged piece, the piece; pieces that overlap in part (pipelined copies and
// host rings) move to an extra track.
TEST(TimelineRendering, BucketPhasesAndPiecesNestInsideTheBucket) {
  const double zero = 50.0;
  const double us = 1e-6;
  const TimelineTrack comm = TimelineTrack::kComm;
  const std::vector<TimelineSpan> spans = {
      {comm, "all-reduce", 4, zero + 10 * us, zero + 100 * us, 2, 4096},
      {comm, "intra-node reduce-scatter", 4, zero + 10 * us, zero + 20 * us, 2, 4096},
      {comm, "cross-node ring", 4, zero + 20 * us, zero + 90 * us, 2, 2048},
      {comm, "D2H", 4, zero + 21 * us, zero + 30 * us, 2, 1024, -1, 0},
      {comm, "host ring", 4, zero + 31 * us, zero + 50 * us, 2, 1024, -1, 0},
      {comm, "D2H", 4, zero + 30 * us, zero + 40 * us, 2, 1024, -1, 1},  // beside piece 0's host ring
      {comm, "intra-node all-gather", 4, zero + 90 * us, zero + 100 * us, 2, 4096},
  };
  const std::string json = timeline_rank_events(spans, {2, "h", "GPU 0"}, zero);
  EXPECT_EQ(
      slices(json, 4),
      (std::vector<std::string>{"all-reduce bucket 2@10.000+90.000", "intra-node reduce-scatter bucket 2@10.000+10.000",
                                "cross-node ring bucket 2@20.000+70.000", "D2H bucket 2 piece 0@21.000+9.000",
                                "D2H bucket 2 piece 1@30.000+10.000", "intra-node all-gather bucket 2@90.000+10.000"}))
      << json;
  EXPECT_EQ(slices(json, 14), (std::vector<std::string>{"host ring bucket 2 piece 0@31.000+19.000"})) << json;
  EXPECT_NE(json.find("\"args\": {\"step\": 4, \"bucket\": 2, \"bytes\": 1024, \"piece\": 1}"), std::string::npos)
      << json;
}

TEST(TimelineRendering, TheDocumentJoinsRanksAndSkipsEmptyOnes) {
  const std::string doc = timeline_document({"{\"a\": 1}", "", "{\"b\": 2}"}, "{\"ranks\": 3}");
  EXPECT_EQ(doc,
            "{\"traceEvents\": [\n{\"a\": 1},\n{\"b\": 2}\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": "
            "{\"ranks\": 3}}\n");
}

}  // namespace
}  // namespace dtrain::train
