#pragma once
// The training loop of dtrain-train: one rank's model replica on its StepEngine (the CPU path or
// the rank's GPU), the shared-seed sharded data, gradients averaged while backward runs, one fused
// SGD update per step, and top-1/top-5 accuracy all-reduced over the ranks at every epoch's end.
// What it reports (the progress line, the metrics file, TensorBoard, the timeline) goes through its
// StepObservers (observe/step_observer.h); the loop itself writes to none of them.
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/gradient_sync/gradient_synchronizer.h"
#include "models/resnet_plan.h"
#include "runtime/rank/rank_context.h"
#include "train/checkpoint/checkpoint.h"
#include "train/config/resolved_config.h"
#include "train/data/data_loader.h"
#include "train/engine/lr_schedule.h"
#include "train/engine/sgd.h"
#include "train/engine/step_engine.h"
#include "train/observe/step_observer.h"
#include "train/observe/step_timer.h"

namespace dtrain::train {

class Trainer {
 public:
  // Collective over ctx.world(): builds everything, broadcasts rank 0's parameters and checks that
  // every rank has the same parameters and config (an error naming the ranks that differ).
  // gpu: the rank's bound GPU, or -1; config.device decides whether the steps run there.
  Trainer(const ResolvedConfig& config, const runtime::RankContext& ctx, int gpu = -1);
  ~Trainer();

  // Stops early, after writing a checkpoint, when a stop signal arrived on any rank.
  EpochResult train_epoch(int epoch);
  // The epochs, then (rank 0) the final weights to the run directory when there is no
  // checkpoint_dir, and the closing summary (run_report.h).
  void run();
  // Whether the run ended at a stop signal (config stop_signals) rather than at its end; the
  // program then exits with runtime::kExitPreempted.
  bool stopped_by_signal() const;
  // The replica's parameters (copied to the host first on the GPU path).
  models::ParameterSet& parameters();

 private:
  struct Parts;
  struct EpochRun;
  struct StepLosses;

  // Construction, in this order (trainer_setup.cc). Collective over the world where they check:
  // a problem found on some ranks only is one usage error on every rank.
  // The datasets, each rank its own copy, and the check that every rank holds the same.
  void open_data(bool on_gpu, int gpu);
  // Synchronized batch norm's groups, then the engine (collective: rank 0's parameters everywhere).
  void build_engine(bool on_gpu, int gpu);
  // The samplers and loaders; returns the training loader's options (for the log).
  LoaderOptions build_loaders();
  void build_schedule();
  // The metrics file, TensorBoard, and on rank 0 the run id, checkpoint_dir and run_dir.
  void open_outputs();
  // The timeline, its range checked against the run's steps, and the observers of the loop.
  void start_observers(const std::string& device);
  // --profile-out's observer, its range checked against the run's steps.
  void add_profile_observer(const std::string& device);
  // The run record, the config for TensorBoard, and the log's account of the steps and schedule.
  void log_start(const LoaderOptions& loader);
  // Collective: every rank's datasets have the same sizes and listing fingerprints; otherwise a
  // UsageError naming the ranks, hosts and counts (printed by rank 0).
  void check_datasets_agree();
  void verify_replicas();

  // The step loop (trainer.cc), on every rank.
  // The train loader on `epoch` from its step `first_step`, unless it already works on it.
  void start_loading(int epoch, long first_step);
  // The learning rate of step `at`, by the images seen (`epoch_images`: the epoch's in all).
  double learning_rate(const StepPosition& at, double epoch_images) const;
  // One optimizer step: accumulation_steps micro-batches from the loader through the engine.
  void run_micro_batches(const StepPosition& at, double lr, EpochRun& run);
  // The step's loss where it is read (report: the step ends a logging interval), every rank's,
  // through the divergence guard; into the epoch's mean.
  StepLosses read_losses(const StepPosition& at, bool report, EpochRun& run);
  // Collective: every rank's `loss` and device memory.
  StepLosses gather_losses(double loss);
  // The observers' report of the logging interval that ends at `at`.
  void report_progress(const StepPosition& at, double lr, const StepLosses& losses, StepTimer& timer);
  // After the step's report: the stop agreement, the checkpoint when due, the observers' step end.
  // True when the ranks agreed to stop after this step.
  bool end_step(const StepPosition& at);
  // The epoch cut short at a stop signal after step `at`.
  EpochResult stop_epoch(const StepPosition& at, EpochRun& run);
  // The epoch's totals over the ranks, its validation and the observers' epoch end.
  EpochResult end_epoch(int epoch, EpochRun& run);
  // Collective: the epoch's mean loss, images/s, and the slowest rank's data wait and median step.
  EpochResult epoch_totals(int epoch, EpochRun& run);
  // A stop signal that came before the first step (while MPI started, data opened, a checkpoint
  // loaded) ends the run at once, on every rank: one blocking agreement.
  bool stopped_before_training();
  void evaluate(EpochResult& result);
  // Rank 0 counts the distinct bad files all ranks skipped so far and logs them; past the limit it
  // stops the job.
  void report_bad_files();

  // Weights in and out (trainer_weights.cc).
  // Rank 0: creates checkpoint_dir (a UsageError naming it if it cannot) and removes the
  // temporaries of checkpoint writes that were killed.
  void prepare_checkpoint_dir();
  // Collective: rank 0 finds and reads the checkpoint `spec` names, every rank goes on from it.
  void resume_from(const std::string& spec);
  // Rank 0: the checkpoint's position into `position` (resume_from's layout) and its tensors into
  // the engine's host mirror; position[3] 0 where --resume latest finds none.
  void read_resume_checkpoint(const std::string& spec, const std::vector<NamedTensor>& tensors, int64_t position[7]);
  // Where this run's geometry continues the checkpoint's epoch, from its images seen.
  void continue_epoch(const int64_t position[7]);
  // init_weights: rank 0 reads the file into the host mirror, the engine hands it to every rank.
  void init_from_weights();
  // Fine-tuning: the backbone's learning-rate scale for `epoch` (0 while frozen), set on the
  // engine when it changes.
  void set_backbone_rate(int epoch);
  // Rank 0 writes the checkpoint (final_weights: the one file of a run without checkpoint_dir, to its
  // run directory); non-finite parameters stop the run instead (never saved). A write that fails is
  // an error when must_write (the final and the stop checkpoint), else a warning (false returned)
  // until max_checkpoint_failures in a row.
  bool save_checkpoint(int epoch, long step_in_epoch, bool final_weights = false, bool must_write = true);
  proto::CheckpointHeader checkpoint_header(int epoch, long step_in_epoch);
  std::string last_good_checkpoint_text() const;
  std::vector<NamedTensor> checkpoint_tensors();

  // The global step the run ends at, from its position and its epochs or max_total_steps (`why`
  // says which), for the timeline's range check.
  long last_global_step(std::string* why) const;
  // Optimizer steps in an epoch: the loader's batches over accumulation_steps (the batches left
  // over, too few for a step, are dropped), capped by max_steps_per_epoch.
  long steps_per_epoch() const;
  // Images of one optimizer step over all ranks: batch_per_rank x ranks x accumulation_steps.
  long global_batch() const;
  // Entries of `epoch`'s shuffled list trained on before its step `step` (this run's geometry).
  long images_before(int epoch, long step) const;
  bool step_limit_reached() const;

  ResolvedConfig config_;
  const runtime::RankContext& ctx_;
  std::unique_ptr<Parts> parts_;
};

}  // namespace dtrain::train
