#include "train/observe/timeline.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <vector>

#include "runtime/base/cli.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/base/version.h"
#include "runtime/io/atomic_file.h"
#include "runtime/io/json.h"
#include "runtime/mpi/mpi_check.h"
#include "runtime/mpi/mpi_gather.h"
#include "train/trainer_collective.h"

namespace dtrain::train {

std::string timeline_rank_path(const std::string& path, int rank) {
  if (rank == 0) return path;
  const std::string suffix = ".rank-" + std::to_string(rank);
  const std::string json = ".json";
  if (path.size() > json.size() && path.compare(path.size() - json.size(), json.size(), json) == 0) {
    return path.substr(0, path.size() - json.size()) + suffix + json;
  }
  return path + suffix + json;
}

Timeline::Timeline(const ResolvedConfig& config, const runtime::RankContext& ctx, std::string device)
    : path_(config.fields.timeline()), steps_text_(config.fields.timeline_steps()), ctx_(ctx) {
  if (path_.empty()) return;
  label_.rank = ctx.topology().world_rank;
  label_.host = runtime::process_identity().host;
  label_.device = std::move(device);
  recorder_ =
      std::make_unique<TimelineRecorder>(parse_timeline_steps(steps_text_, runtime::flag_name("timeline_steps")),
                                         timeline_spans_per_rank(ctx.topology().world_size));
}

void Timeline::check_run(long first_step, long last_step, const std::string& last_why) {
  if (!recorder_) return;
  const TimelineRange& range = recorder_->range();
  const std::string flag = runtime::flag_name("timeline_steps") + " " + steps_text_;
  DTRAIN_USAGE_CHECK(range.last <= last_step)
      << flag << ": the run ends at global step " << last_step << " (" << last_why << "), before step " << range.last
      << "; give a range within " << first_step << ":" << last_step;
  DTRAIN_USAGE_CHECK(range.last >= first_step)
      << flag << ": the run starts at global step " << first_step
      << " (resumed), after the range ends; give a range within " << first_step << ":" << last_step;
  if (ctx_.topology().world_rank != 0) return;
  const std::filesystem::path file(path_);
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  DTRAIN_USAGE_CHECK(!ec && std::filesystem::is_directory(dir) && ::access(dir.c_str(), W_OK | X_OK) == 0)
      << runtime::flag_name("timeline") << " " << path_ << ": cannot write to its directory " << dir.string()
      << (ec ? ": " + ec.message() : std::string());
  DTRAIN_USAGE_CHECK(!std::filesystem::is_directory(file))
      << runtime::flag_name("timeline") << " " << path_ << ": is a directory; give a file name (e.g. timeline.json)";
}

std::string Timeline::other_data(int ranks, long spans, long dropped, const std::string& ending) const {
  const TimelineRange& range = recorder_->range();
  return runtime::JsonObject()
      .text("producer", std::string("dtrain-train ") + DTRAIN_VERSION_STRING)
      .integer("first_step", range.first)
      .integer("last_step", range.last)
      .integer("ranks", ranks)
      .integer("spans", spans)
      .integer("dropped_spans", dropped)
      .integer("max_spans_per_rank", static_cast<int64_t>(timeline_spans_per_rank(ctx_.topology().world_size)))
      .boolean("complete", ending.empty())
      .text("ending", ending.empty() ? "the range ran to its end" : ending)
      .text("clock",
            "microseconds from the earliest span; each rank's steady clock, lined up at a barrier when the file "
            "was written; GPU spans from CUDA events on their streams")
      .str();
}

void Timeline::write(comm::StallChannel& stall, comm::FaultInjector& faults, const std::string& ending) {
  if (!recorder_ || written_) return;
  written_ = true;
  const std::vector<TimelineSpan>& spans = recorder_->spans();
  std::string mine;
  long totals[2] = {static_cast<long>(spans.size()), static_cast<long>(recorder_->dropped())};
  std::vector<std::string> all;
  {
    TrainerCollective watched(stall, faults, "trainer: timeline gather");
    // Every rank leaves the barrier at nearly the same moment: that moment lines the clocks up.
    DTRAIN_MPI_CHECK(MPI_Barrier(ctx_.world()));
    const double common = runtime::steady_seconds();
    double earliest = std::numeric_limits<double>::infinity();
    for (const TimelineSpan& s : spans) earliest = std::min(earliest, s.begin - common);
    DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &earliest, 1, MPI_DOUBLE, MPI_MIN, ctx_.world()));
    mine = timeline_rank_events(spans, label_, common + (earliest < 0 ? earliest : 0));
    DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_LONG, MPI_SUM, ctx_.world()));
    all = runtime::gather_strings(ctx_.world(), mine);
  }
  if (ctx_.topology().world_rank != 0) return;
  const int ranks = ctx_.topology().world_size;
  try {
    runtime::write_file_atomically(path_, timeline_document(all, other_data(ranks, totals[0], totals[1], ending)),
                                   "timeline");
  } catch (const runtime::Error& e) {  // a side output never costs the training (a full disk, say)
    DTRAIN_LOG(kWarn) << "timeline: not written: " << e.detail() << "; training goes on";
    return;
  }
  const TimelineRange& range = recorder_->range();
  DTRAIN_LOG(kInfo) << "timeline of steps " << range.first << "-" << range.last << " (" << ranks << " rank(s), "
                    << totals[0] << " spans" << (ending.empty() ? "" : "; " + ending) << ") written to " << path_
                    << ": open it in https://ui.perfetto.dev or chrome://tracing";
  if (totals[1] > 0) {
    DTRAIN_LOG(kWarn) << "timeline: " << totals[1] << " span(s) dropped past the cap of "
                      << timeline_spans_per_rank(ranks) << " per rank (record fewer steps, or larger bucket_mib)";
  }
}

void Timeline::write_after_error() noexcept {
  if (!pending()) return;
  written_ = true;
  const std::string path = timeline_rank_path(path_, label_.rank);
  try {
    const std::vector<TimelineSpan>& spans = recorder_->spans();
    double earliest = std::numeric_limits<double>::infinity();
    for (const TimelineSpan& s : spans) earliest = std::min(earliest, s.begin);
    const std::vector<std::string> events = {timeline_rank_events(spans, label_, spans.empty() ? 0.0 : earliest)};
    runtime::write_file_atomically(
        path,
        timeline_document(events,
                          other_data(1, static_cast<long>(spans.size()), static_cast<long>(recorder_->dropped()),
                                     "an error on rank " + std::to_string(label_.rank) +
                                         " ended the run inside the range; this rank's spans only")),
        "timeline");
    DTRAIN_LOG(kWarn) << "timeline: the run failed inside the range; this rank's " << spans.size()
                      << " span(s) written to " << path;
  } catch (const std::exception& e) {
    DTRAIN_LOG(kWarn) << "timeline: could not write " << path << " after the error: " << e.what();
  }
}

}  // namespace dtrain::train
