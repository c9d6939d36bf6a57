#pragma once
// What a training run tells its user at the start and at the end, apart from the step loop: the
// effective config written to the run directory (run_directory.h) with a one-line summary in the
// log, the metrics file's "run" header record, and the closing summary (time, images/s, best and
// final validation accuracy, where the config, weights, checkpoints and metrics went).
#include <chrono>
#include <string>
#include <vector>

#include "runtime/rank/rank_context.h"
#include "train/config/resolved_config.h"
#include "train/observe/metrics_log.h"

namespace dtrain::train {

// Rank 0's record of where this run's outputs go ("" where there is none).
struct RunOutputs {
  std::string run_dir;        // the directory prepare_run_dir chose
  std::string config_file;    // run_dir/config.pbtxt
  std::string final_weights;  // the newest checkpoint this run wrote
  std::string metrics_file;
  std::string tensorboard_file;  // rank 0's event file, when tensorboard_dir is set
};

// One epoch's validation, all ranks.
struct ValidationResult {
  int epoch = 0;
  double top1 = 0, top5 = 0;  // fractions
};

// This run's totals (a resumed run counts from its resume).
struct RunTotals {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  long steps = 0;
  double images = 0;         // trained by all ranks
  double train_seconds = 0;  // wall time in the step loops; validation and checkpoints excluded
  std::vector<ValidationResult> validations;
  // The GPU caching allocator's peaks, in use and reserved, the largest over the ranks as of the
  // last loss read; 0 on CPUs.
  double device_peak_bytes = 0, device_reserved_bytes = 0;
};

// Collective over ctx.world() (the hosts are gathered). Rank 0 writes run_dir/config.pbtxt
// (config_text.h) and records its path in `outputs`, logs the config's summary with that path, and
// writes the metrics "run" record: dtrain version, run id, start time, the global step it starts
// at (after a resume), world size, nodes, hosts, run directory and the full config as JSON.
void start_run_record(const ResolvedConfig& config, const runtime::RankContext& ctx, const std::string& run_id,
                      long start_step, RunOutputs& outputs, MetricsLog& metrics);

// Rank 0: the closing summary in the log and the metrics "summary" record. stopped: the run ended
// at a stop signal.
void log_run_summary(const ResolvedConfig& config, const runtime::RankContext& ctx, const RunOutputs& outputs,
                     const RunTotals& totals, bool stopped, MetricsLog& metrics);

}  // namespace dtrain::train
