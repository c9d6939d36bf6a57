#pragma once
// The training loop's observers (step_observer.h says when each event comes): the progress line,
// the metrics file, TensorBoard, the timeline and the step profile. Each is a thin adapter that turns the loop's
// events into its sink's lines, records or spans; the sinks themselves (metrics_log.h,
// tensorboard_writer.h, timeline.h) know nothing of the loop.
#include "comm/diagnostics/fault_injection.h"
#include "comm/diagnostics/stall_inspector.h"
#include "train/engine/step_engine.h"
#include "train/observe/metrics_log.h"
#include "train/observe/step_observer.h"
#include "train/observe/step_profile.h"
#include "train/observe/tensorboard_writer.h"
#include "train/observe/timeline.h"

namespace dtrain::train {

// The training log's progress line at each logging interval and the epoch's line after its
// validation (rank 0 logs them; DTRAIN_LOG0).
class ProgressLine final : public StepObserver {
 public:
  void on_progress(const ProgressReport& report) override;
  void on_epoch_end(const EpochReport& report) override;
};

// The metrics file's "train" record per logging interval and "validation" record per epoch (a
// no-op log on ranks other than 0).
class MetricsObserver final : public StepObserver {
 public:
  explicit MetricsObserver(MetricsLog& metrics) : metrics_(metrics) {}
  void on_progress(const ProgressReport& report) override;
  void on_epoch_end(const EpochReport& report) override;

 private:
  MetricsLog& metrics_;
};

// TensorBoard's train/ scalars per logging interval and validation/ scalars per epoch, at the global
// step (a writer that writes nothing on ranks other than 0).
class TensorBoardObserver final : public StepObserver {
 public:
  explicit TensorBoardObserver(TensorBoardWriter& writer) : writer_(writer) {}
  void on_progress(const ProgressReport& report) override;
  void on_epoch_end(const EpochReport& report) override;

 private:
  TensorBoardWriter& writer_;
};

// The timeline's spans of the step loop's thread (step, data wait, loss read-back, checkpoint
// write) for the steps of its range; the engine is told to add its phases of those steps. At the
// range's last step, at a stop signal inside the range, or at the run's end inside it, every rank
// writes the file together (a collective: the GPU's events turned into times, then the gather).
class TimelineObserver final : public StepObserver {
 public:
  TimelineObserver(Timeline& timeline, StepEngine& engine, comm::StallChannel& stall, comm::FaultInjector& faults)
      : timeline_(timeline), engine_(engine), stall_(stall), faults_(faults) {}
  void on_step_begin(const StepPosition& at) override;
  void on_batch_ready(const StepPosition& at, int micro_batch, int micro_batches, double waited) override;
  void on_losses_read(const StepPosition& at, double began) override;
  void on_checkpoint_written(const StepPosition& at, double began) override;
  void on_step_end(const StepPosition& at, bool stopping) override;
  void on_run_end(long global_step) override;

 private:
  // A span of the step loop's thread from `began` until now.
  void add(const char* name, const StepPosition& at, double began, int micro_batch = -1);
  void write(const std::string& ending);

  Timeline& timeline_;
  StepEngine& engine_;
  comm::StallChannel& stall_;
  comm::FaultInjector& faults_;
  TimelineRecorder* recorder_ = nullptr;  // the current step's, while the range covers it
  double step_began_ = 0;
};

// --profile-out: on rank 0 the engine profiles each step of --profile-steps (step_profile.h); when
// the run ends rank 0 writes the medians, with the run's median step time of its last epoch (0
// when no epoch ended). No collective: the other ranks only train.
class ProfileObserver final : public StepObserver {
 public:
  ProfileObserver(StepEngine& engine, std::string path, TimelineRange range, ProfileSource source, bool rank0)
      : engine_(engine), path_(std::move(path)), range_(range), source_(std::move(source)), rank0_(rank0) {}
  void on_step_begin(const StepPosition& at) override;
  void on_step_end(const StepPosition& at, bool stopping) override;
  void on_epoch_end(const EpochReport& report) override;
  void on_run_end(long global_step) override;

 private:
  StepEngine& engine_;
  std::string path_;
  TimelineRange range_;
  ProfileSource source_;
  bool rank0_;
  bool profiling_ = false;
  StepPhases phases_;
  StepProfile profile_;
};

}  // namespace dtrain::train
