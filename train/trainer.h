#pragma once
// The training loop of dtrain-train: one rank's model replica on its StepEngine (the CPU path or
// the rank's GPU), the shared-seed sharded data, gradients averaged while backward runs, one fused
// SGD update per step, and top-1/top-5 accuracy all-reduced over the ranks at every epoch's end.
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
#include "train/observe/step_timer.h"

namespace dtrain::train {

struct EpochResult {
  int epoch = 0;
  double train_loss = 0;  // mean over the epoch's steps and ranks
  double top1 = 0;        // validation accuracy, fraction
  double top5 = 0;
  long validation_images = 0;
  double images_per_second = 0;         // training, all ranks, this epoch
  double median_images_per_second = 0;  // per-step median, after timing_warmup_steps
  double test_loss = 0;
  double data_wait_fraction = 0;  // of the epoch's training wall time, slowest rank
};

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
  // Collective: every rank's datasets have the same sizes and listing fingerprints; otherwise a
  // UsageError naming the ranks, hosts and counts (printed by rank 0).
  void check_datasets_agree();
  void verify_replicas();
  // Collective, once per step: true on every rank when a stop signal reached any rank (a step
  // ago, at most two: the flags travel in a non-blocking all-reduce completed one step later).
  bool stop_agreed();
  // A stop signal that came before the first step (while MPI started, data opened, a checkpoint
  // loaded) ends the run at once, on every rank: one blocking agreement.
  bool stopped_before_training();
  void finish_stop_poll();
  // The progress line and the "train" metrics record for the logging interval that ends at `step`,
  // with every rank's loss and the largest device memory.
  void report_progress(int epoch, long step, long steps, double lr, const std::vector<double>& losses,
                       const DeviceMemory& memory, StepTimer& timer);
  void evaluate(EpochResult& result);
  // Rank 0 counts the distinct bad files all ranks skipped so far and logs them; past the limit it
  // stops the job.
  void report_bad_files();
  // Divergence guard, on every rank at each loss read-back with every rank's loss: counts the
  // consecutive checks with a non-finite loss; past max_nonfinite_steps rank 0 stops the job with
  // an error naming the step (the other ranks go on until its abort ends them).
  void check_losses(const std::vector<double>& losses, int epoch, long step, long steps);
  // Rank 0: creates checkpoint_dir (a UsageError naming it if it cannot) and removes the
  // temporaries of checkpoint writes that were killed.
  void prepare_checkpoint_dir();
  void resume_from(const std::string& spec);
  // init_weights: rank 0 reads the file into the host mirror, the engine hands it to every rank.
  void init_from_weights();
  // Fine-tuning: the backbone's learning-rate scale for `epoch` (0 while frozen), set on the
  // engine when it changes.
  void set_backbone_rate(int epoch);
  // Rank 0 writes the checkpoint (final_weights: the one file of a run without checkpoint_dir, to its
  // run directory); non-finite parameters stop the run instead (never saved).
  void save_checkpoint(int epoch, long step_in_epoch, bool final_weights = false);
  // The global step the run ends at, from its position and its epochs or max_total_steps (`why`
  // says which), for the timeline's range check.
  long last_global_step(std::string* why) const;
  // Collective: the GPU's timeline events into spans, then the file (timeline.h).
  void write_timeline(const std::string& ending);
  // Optimizer steps in an epoch: the loader's batches over accumulation_steps (the batches left
  // over, too few for a step, are dropped), capped by max_steps_per_epoch.
  long steps_per_epoch() const;
  // Images of one optimizer step over all ranks: batch_per_rank x ranks x accumulation_steps.
  long global_batch() const;
  // Entries of `epoch`'s shuffled list trained on before its step `step` (this run's geometry).
  long images_before(int epoch, long step) const;
  bool step_limit_reached() const;
  std::vector<NamedTensor> checkpoint_tensors();

  ResolvedConfig config_;
  const runtime::RankContext& ctx_;
  std::unique_ptr<Parts> parts_;
};

}  // namespace dtrain::train
