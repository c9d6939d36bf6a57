#include "train/observe/run_report.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/io/atomic_file.h"
#include "runtime/io/json.h"
#include "runtime/mpi/mpi_gather.h"
#include "runtime/rank/versions.h"
#include "train/config/config_text.h"
#include "train/observe/progress.h"

namespace dtrain::train {
namespace {

std::string percent(double fraction) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(2) << 100 * fraction << "%";
  return text.str();
}

// The full config as JSON, proto field names, every field (checkpoints hold the same).
std::string config_json(const TrainConfig& config) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(config, &json, options).ok()) return "null";
  return json;
}

}  // namespace

void start_run_record(const ResolvedConfig& config, const runtime::RankContext& ctx, const std::string& run_id,
                      long start_step, RunOutputs& outputs, MetricsLog& metrics) {
  const std::vector<std::string> hosts = runtime::gather_strings(ctx.world(), runtime::process_identity().host);
  const runtime::Topology& t = ctx.topology();
  if (t.world_rank != 0) return;
  const std::string started = utc_time(std::chrono::system_clock::now());
  if (!outputs.run_dir.empty()) {
    outputs.config_file = (std::filesystem::path(outputs.run_dir) / "config.pbtxt").string();
    std::ostringstream header;
    header << "dtrain-train's effective config of run " << run_id << ", started " << started << " on " << t.world_size
           << " rank(s).\n"
           << "Fields that do not apply to this run are left out; its checkpoints hold the full config.\n"
           << "Train with it again: dtrain-train --config " << outputs.config_file;
    runtime::write_file_atomically(outputs.config_file, config_text(config, header.str()), "config");
  }
  DTRAIN_LOG(kInfo) << "config: " << config_summary(config)
                    << (outputs.config_file.empty() ? std::string() : "; every field in " + outputs.config_file);
  std::vector<std::string> distinct;
  for (const std::string& host : hosts) {
    if (std::find(distinct.begin(), distinct.end(), host) == distinct.end()) distinct.push_back(host);
  }
  std::vector<std::string> host_json;
  for (const std::string& host : distinct) host_json.push_back(runtime::json_string(host));
  metrics.write_json("run", {{"version", runtime::json_string(runtime::library_versions().dtrain)},
                             {"run_id", runtime::json_string(run_id)},
                             {"start_time", runtime::json_string(started)},
                             {"start_step", std::to_string(start_step)},
                             {"world_size", std::to_string(t.world_size)},
                             {"nodes", std::to_string(t.node_count)},
                             {"hosts", runtime::json_array(host_json)},
                             {"run_dir", runtime::json_string(outputs.run_dir)},
                             {"resume", runtime::json_string(config.fields.resume())},
                             {"config", config_json(config.fields)}});
}

void log_run_summary(const ResolvedConfig& config, const runtime::RankContext& ctx, const RunOutputs& outputs,
                     const RunTotals& totals, bool stopped, MetricsLog& metrics) {
  const runtime::Topology& t = ctx.topology();
  if (t.world_rank != 0) return;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - totals.start).count();
  const double rate = totals.train_seconds > 0 ? totals.images / totals.train_seconds : 0;
  std::ostringstream line;
  line << std::fixed << std::setprecision(1)
       << "summary: " << (stopped ? "stopped by a stop signal after " : "finished ") << totals.steps << " step(s) in "
       << format_duration(wall) << " (" << format_duration(totals.train_seconds) << " of them training), " << rate
       << " images/s in total, " << rate / t.world_size << " per rank (" << t.world_size << " rank(s))";
  if (totals.device_peak_bytes > 0) {
    line << ", GPU memory " << format_gib(totals.device_peak_bytes) << " peak in use, "
         << format_gib(totals.device_reserved_bytes) << " peak reserved";
  }
  DTRAIN_LOG(kInfo) << line.str();
  std::vector<std::pair<std::string, double>> record = {
      {"steps", static_cast<double>(totals.steps)},  {"wall_seconds", wall},
      {"train_seconds", totals.train_seconds},       {"img_per_sec", rate},
      {"img_per_sec_per_rank", rate / t.world_size}, {"stopped", stopped ? 1.0 : 0.0}};
  if (totals.device_peak_bytes > 0) {
    record.insert(record.end(),
                  {{"gpu_peak_bytes", totals.device_peak_bytes}, {"gpu_reserved_bytes", totals.device_reserved_bytes}});
  }
  if (totals.validations.empty()) {
    DTRAIN_LOG(kInfo) << "summary: no validation in this run (it ends at each epoch's end)";
  } else {
    const ValidationResult& last = totals.validations.back();
    const ValidationResult& best =
        *std::max_element(totals.validations.begin(), totals.validations.end(),
                          [](const ValidationResult& a, const ValidationResult& b) { return a.top1 < b.top1; });
    double best_top5 = 0;
    for (const ValidationResult& v : totals.validations) best_top5 = std::max(best_top5, v.top5);
    DTRAIN_LOG(kInfo) << "summary: validation top-1 " << percent(last.top1) << " final (epoch " << last.epoch << "), "
                      << percent(best.top1) << " best (epoch " << best.epoch << "); top-5 " << percent(last.top5)
                      << " final, " << percent(best_top5) << " best";
    record.insert(record.end(), {{"final_top1", last.top1},
                                 {"best_top1", best.top1},
                                 {"best_top1_epoch", best.epoch},
                                 {"final_top5", last.top5},
                                 {"best_top5", best_top5}});
  }
  const std::string& checkpoints = config.fields.checkpoint_dir();
  DTRAIN_LOG(kInfo) << "summary: config " << (outputs.config_file.empty() ? "not written" : outputs.config_file)
                    << "; final weights " << (outputs.final_weights.empty() ? "not written" : outputs.final_weights)
                    << "; checkpoints " << (checkpoints.empty() ? "none (no --checkpoint-dir)" : "in " + checkpoints)
                    << "; metrics "
                    << (outputs.metrics_file.empty() ? "none (no --metrics-file)" : outputs.metrics_file)
                    << (outputs.tensorboard_file.empty() ? "" : "; TensorBoard events " + outputs.tensorboard_file);
  metrics.write("summary", record);
}

}  // namespace dtrain::train
