#pragma once
// The Trainer's state (trainer.h keeps it behind a pointer): what trainer.cc, trainer_setup.cc and
// trainer_weights.cc share. Not for other users.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/diagnostics/fault_injection.h"
#include "comm/diagnostics/stall_inspector.h"
#include "train/data/data_loader.h"
#include "train/data/dataset.h"
#include "train/data/sharded_sampler.h"
#include "train/device_data_wait.h"
#include "train/divergence_guard.h"
#include "train/engine/lr_schedule.h"
#include "train/engine/step_engine.h"
#include "train/observe/metrics_log.h"
#include "train/observe/run_report.h"
#include "train/observe/step_observer.h"
#include "train/observe/step_timer.h"
#include "train/observe/tensorboard_writer.h"
#include "train/observe/timeline.h"
#include "train/proto/checkpoint.pb.h"
#include "train/stop_agreement.h"
#include "train/trainer.h"

namespace dtrain::train {

struct Trainer::Parts {
  // The stall inspector's view of the trainer's own collectives (the loss all-gather, the stop
  // agreement, the epoch and evaluation totals): a rank stopped or hung while the others wait in
  // one of them is named, and the job ends at the abort time, as inside the communicators.
  std::unique_ptr<comm::StallChannel> stall;
  comm::FaultInjector faults{comm::fault_plan_from_env("DTRAIN_FAULT_INJECT_TRAINER")};
  std::unique_ptr<Dataset> train_data;
  std::unique_ptr<Dataset> val_data;
  std::unique_ptr<ShardedSampler> train_sampler;
  std::unique_ptr<ShardedSampler> val_sampler;
  std::unique_ptr<DataLoader> train_loader;
  std::unique_ptr<DataLoader> val_loader;
  std::unique_ptr<StepEngine> engine;
  std::unique_ptr<LinearScalingSchedule> schedule;
  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<TensorBoardWriter> tensorboard;  // rank 0's; writes nothing elsewhere
  std::unique_ptr<Timeline> timeline;              // records nothing without --timeline
  // The progress line, the metrics file, TensorBoard and the timeline, in that order (which orders
  // their log lines); the step loop reports through them only.
  StepObserverList observers;
  std::unique_ptr<StopAgreement> stop;
  std::unique_ptr<DivergenceGuard> divergence;
  long global_step = 0;
  int start_epoch = 0;
  int loading_epoch = -1;  // the epoch the train loader already works on from its first batch
  long start_step_in_epoch = 0;
  // A resume on another world size or batch: the start epoch's shuffled list is dealt over the
  // ranks again from this entry (the images already trained on), starting at start_step_in_epoch.
  size_t start_entry = 0;
  std::string run_id;                   // rank 0: names this run's checkpoints
  RunOutputs outputs;                   // rank 0: where this run's config, weights and metrics go
  RunTotals totals;                     // this run's steps, images, time and validation results
  std::pair<int, long> position{0, 0};  // epoch and step in it after the latest step
  bool stopped = false;                 // this run ended at a stop signal
  proto::EpochSums resumed_sums;        // the checkpoint's sums of the epoch it resumes inside
  EpochRun* current_run = nullptr;      // the epoch in progress, whose sums a checkpoint carries
  int checkpoint_failures = 0;          // rank 0: periodic checkpoints failed in a row
  std::string last_checkpoint;          // rank 0: the newest whole one, written or resumed from
  float mean[3] = {0, 0, 0};
  float std[3] = {1, 1, 1};
  float backbone_lr_scale = 1;  // what the engine's optimizer applies now (fine-tuning)
};

// One epoch's step loop: its geometry, its clocks and its loss sum, apart from the run's state.
struct Trainer::EpochRun {
  EpochRun(StepEngine& engine, long first, long count, double images, int micro_batches)
      : first_step(first), steps(count), epoch_images(images), device_waits(engine, timer, micro_batches) {}
  const long first_step;      // where this call starts (after a resume, inside the epoch)
  const long steps;           // optimizer steps in the epoch
  const double epoch_images;  // the epoch's images in all, for the schedule's position
  // The epoch, and the first logging interval, start when this is built.
  StepTimer timer;
  DeviceDataWait device_waits;
  double loss_sum = 0;  // over every rank's loss at the steps whose loss was read
  long losses_read = 0;
  proto::EpochSums before;  // the epoch's steps before a resume
};

// A step's loss as read back: every rank's, and the largest device memory over the ranks.
struct Trainer::StepLosses {
  std::vector<double> losses;
  DeviceMemory memory;
};

}  // namespace dtrain::train
