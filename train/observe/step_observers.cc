#include "train/observe/step_observers.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/steady_seconds.h"
#include "train/observe/progress.h"

namespace dtrain::train {

void ProgressLine::on_progress(const ProgressReport& r) {
  const double rate = r.images_per_second;
  std::ostringstream gpu;
  if (r.device_peak_bytes > 0) {
    gpu << ", GPU memory " << format_gib(r.device_peak_bytes) << " peak, " << format_gib(r.device_reserved_bytes)
        << " reserved";
  }
  // "epoch E step S/T": S counts the epoch's optimizer steps; the records' "step" is the global step.
  DTRAIN_LOG0(kInfo) << "epoch " << r.at.epoch << " step " << r.at.step + 1 << "/" << r.at.steps << " loss " << r.loss
                     << " lr " << r.lr << ", " << static_cast<long>(rate) << " images/s ("
                     << static_cast<long>(rate / r.world_size) << " per rank), data wait "
                     << std::round(1000 * r.data_wait_fraction) / 10 << "%, epoch ETA "
                     << format_duration(r.epoch_eta_seconds) << gpu.str() << " (global step " << r.at.global_step
                     << ")";
}

void ProgressLine::on_epoch_end(const EpochReport& report) {
  const EpochResult& result = report.result;
  const int world = report.world_size;
  DTRAIN_LOG0(kInfo) << "epoch " << result.epoch << ": train loss " << result.train_loss << ", validation loss "
                     << result.test_loss << " top-1 " << 100 * result.top1 << "% top-5 " << 100 * result.top5 << "% ("
                     << result.validation_images << " images), " << static_cast<long>(result.median_images_per_second)
                     << " images/s (" << static_cast<long>(result.median_images_per_second / world)
                     << " per rank) at the median step, data wait " << 100 * result.data_wait_fraction << "%";
  if (!report.jpeg_report.empty()) {
    DTRAIN_LOG0(kInfo) << report.jpeg_report;
  }
}

void MetricsObserver::on_progress(const ProgressReport& r) {
  const double rate = r.images_per_second;
  std::vector<std::pair<std::string, double>> record = {{"epoch", r.at.epoch},
                                                        {"step", static_cast<double>(r.at.global_step)},
                                                        {"epoch_step", static_cast<double>(r.at.step + 1)},
                                                        {"epoch_steps", static_cast<double>(r.at.steps)},
                                                        {"loss", r.loss},
                                                        {"lr", r.lr},
                                                        {"img_per_sec", rate},
                                                        {"img_per_sec_per_rank", rate / r.world_size},
                                                        {"data_wait_fraction", r.data_wait_fraction},
                                                        {"epoch_eta_seconds", r.epoch_eta_seconds}};
  if (r.device_peak_bytes > 0) {
    record.insert(record.end(),
                  {{"gpu_peak_bytes", r.device_peak_bytes}, {"gpu_reserved_bytes", r.device_reserved_bytes}});
  }
  metrics_.write("train", record);
}

void MetricsObserver::on_epoch_end(const EpochReport& report) {
  const EpochResult& result = report.result;
  metrics_.write("validation", {{"epoch", result.epoch},
                                {"step", static_cast<double>(report.global_step)},
                                {"train_loss", result.train_loss},
                                {"loss", result.test_loss},
                                {"top1", result.top1},
                                {"top5", result.top5},
                                {"images", static_cast<double>(result.validation_images)},
                                {"img_per_sec", result.median_images_per_second},
                                {"img_per_sec_per_rank", result.median_images_per_second / report.world_size},
                                {"data_wait_fraction", result.data_wait_fraction}});
}

void TensorBoardObserver::on_progress(const ProgressReport& r) {
  writer_.scalar("train/loss", r.loss, r.at.global_step);
  writer_.scalar("train/lr", r.lr, r.at.global_step);
  writer_.scalar("train/images_per_sec", r.images_per_second, r.at.global_step);
  writer_.scalar("train/data_wait_fraction", r.data_wait_fraction, r.at.global_step);
}

void TensorBoardObserver::on_epoch_end(const EpochReport& report) {
  const EpochResult& result = report.result;
  writer_.scalar("validation/top1", result.top1, report.global_step);
  writer_.scalar("validation/top5", result.top5, report.global_step);
  writer_.scalar("validation/loss", result.test_loss, report.global_step);
  writer_.scalar("train/epoch_loss", result.train_loss, report.global_step);
  writer_.scalar("train/epoch_images_per_sec", result.median_images_per_second, report.global_step);
}

void TimelineObserver::add(const char* name, const StepPosition& at, double began, int micro_batch) {
  recorder_->add(
      {TimelineTrack::kStepLoop, name, at.global_step, began, runtime::steady_seconds(), -1, -1, micro_batch});
}

void TimelineObserver::on_step_begin(const StepPosition& at) {
  recorder_ = timeline_.recorder_for(at.global_step);
  if (recorder_ == nullptr) return;  // outside the range: one comparison per step
  step_began_ = runtime::steady_seconds();
  timeline_.mark_started();
}

void TimelineObserver::on_batch_ready(const StepPosition& at, int micro_batch, int micro_batches, double waited) {
  if (recorder_ == nullptr) return;
  add("data wait", at, runtime::steady_seconds() - waited, micro_batches > 1 ? micro_batch : -1);
  engine_.trace_next_step(recorder_, at.global_step);
}

void TimelineObserver::on_losses_read(const StepPosition& at, double began) {
  // On the GPU the host waits for the step here (the loss is read back only where it is logged).
  if (recorder_ != nullptr) add("loss read-back", at, began);
}

void TimelineObserver::on_checkpoint_written(const StepPosition& at, double began) {
  if (recorder_ != nullptr) add("checkpoint write", at, began);
}

void TimelineObserver::on_step_end(const StepPosition& at, bool stopping) {
  if (recorder_ != nullptr) add("step", at, step_began_);
  recorder_ = nullptr;
  // The range's end, or a stop signal inside it: every rank is here at the same step.
  if (timeline_.pending() && (at.global_step == timeline_.last_step() || stopping)) {
    write(stopping ? "stopped by a stop signal at step " + std::to_string(at.global_step) : std::string());
  }
}

void TimelineObserver::on_run_end(long global_step) {
  // The range lies within the run (checked at start), so only a run that ended otherwise than
  // planned leaves spans here.
  if (timeline_.pending()) write("the run ended at step " + std::to_string(global_step));
}

void TimelineObserver::write(const std::string& ending) {
  engine_.flush_timeline();  // the GPU's events into host times: one wait, after the range
  timeline_.write(stall_, faults_, ending);
}

void ProfileObserver::on_step_begin(const StepPosition& at) {
  profiling_ = rank0_ && at.global_step >= range_.first && at.global_step <= range_.last;
  if (profiling_) engine_.profile_next_step(&phases_);
}

void ProfileObserver::on_step_end(const StepPosition& /*at*/, bool /*stopping*/) {
  if (!profiling_) return;
  engine_.profile_next_step(nullptr);  // a step cut short leaves nothing armed
  profile_.add(std::exchange(phases_, StepPhases{}));
  profiling_ = false;
}

void ProfileObserver::on_epoch_end(const EpochReport& report) {
  const double rate = report.result.median_images_per_second;  // every rank's images
  if (rate > 0) {
    source_.step_ms = 1e3 * source_.batch_per_gpu * source_.accumulation_steps * report.world_size / rate;
  }
}

void ProfileObserver::on_run_end(long global_step) {
  if (!rank0_) return;
  DTRAIN_USAGE_CHECK(profile_.steps() > 0) << "--profile-steps " << range_.first << ":" << range_.last
                                           << ": no step profiled, the run ended at step " << global_step;
  profile_.write(path_, source_, "--profile-out file");
  DTRAIN_LOG0(kInfo) << "profile: steps " << range_.first << "-" << std::min(range_.last, global_step) << " to "
                     << path_;
}

}  // namespace dtrain::train
