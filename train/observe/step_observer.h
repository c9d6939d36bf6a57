#pragma once
// What the training loop tells those who report on it: the progress line, the metrics file,
// TensorBoard and the timeline (step_observers.h) each implement StepObserver, and the Trainer calls
// them through one StepObserverList, so the loop itself holds no sink's code.
//
// Contract, for every implementation:
// - Who calls: the Trainer, on every rank, on the thread that runs the step loop; never two calls at
//   once. An observer needs no lock of its own.
// - When: for each optimizer step, on_step_begin, then on_batch_ready once per micro-batch (in
//   order), then on_losses_read where the step's loss was read back, on_progress where it ends a
//   logging interval, on_checkpoint_written where rank 0 wrote a checkpoint after it, and
//   on_step_end last. on_epoch_end after each epoch's validation (not after an epoch cut short by
//   a stop signal), on_run_end once when training is over. After an exception nothing more is
//   called.
// - Which ranks: every event reaches every rank except on_checkpoint_written (rank 0 only, which
//   writes the file). What only rank 0 writes (the log lines, the metrics file, TensorBoard) the
//   sinks decide themselves (DTRAIN_LOG0; a sink built on the other ranks writes nothing), so that
//   every rank takes the same path through the loop.
// - Collectives: on_step_end and on_run_end may run a collective (the timeline's gather), which is
//   why they reach every rank at the same step; no other event may.
// - Times are seconds on runtime::steady_seconds()'s clock (runtime/base/steady_seconds.h), the
//   clock of StepTimer and the timeline.
// - Errors: an observer's exception ends the run like the loop's own.
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::train {

// One epoch's results, as train_epoch returns them and on_epoch_end reports them.
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

// Where a step lies: in its epoch and in the run.
struct StepPosition {
  int epoch = 0;
  long step = 0;         // in the epoch, 0-based; the log's "step S/T" is step + 1 of steps
  long steps = 0;        // optimizer steps in the epoch
  long global_step = 0;  // this step's number in the run, 1-based, as in the log and the records
};

// The logging interval that ends at a step (every log_every_steps and at the epoch's end), over
// every rank.
struct ProgressReport {
  StepPosition at;
  double loss = 0;  // the mean of every rank's loss of this step
  double lr = 0;
  double images_per_second = 0;  // all ranks' images over rank 0's wall time (progress.h)
  int world_size = 1;
  double data_wait_fraction = 0;  // of the interval, this rank's
  double epoch_eta_seconds = 0;
  double device_peak_bytes = 0;  // the largest over the ranks; 0 where the steps run on CPUs
  double device_reserved_bytes = 0;
};

// An epoch's end, after its validation.
struct EpochReport {
  const EpochResult& result;
  long global_step = 0;  // the epoch's last step
  int world_size = 1;
  std::string jpeg_report;  // the engine's account of where it decoded JPEGs; empty when it did not
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Before the step asks the loader for its first batch.
  virtual void on_step_begin(const StepPosition& /*at*/) {}
  // Micro-batch `micro_batch` of `micro_batches` (1 without gradient accumulation) came from the
  // loader after `waited` seconds blocked on it; the engine runs it next.
  virtual void on_batch_ready(const StepPosition& /*at*/, int /*micro_batch*/, int /*micro_batches*/,
                              double /*waited*/) {}
  // Every rank's loss of the step was gathered and checked for divergence; the read-back began at
  // `began` and ends now. Only at steps whose loss is read (where it is reported, at the epoch's
  // end, and at every step where reading it costs nothing).
  virtual void on_losses_read(const StepPosition& /*at*/, double /*began*/) {}
  virtual void on_progress(const ProgressReport& /*report*/) {}
  // Rank 0 only: it wrote a checkpoint from `began` until now.
  virtual void on_checkpoint_written(const StepPosition& /*at*/, double /*began*/) {}
  // The step is over, its checkpoint written. `stopping`: the ranks agreed to stop at a stop
  // signal after this step, the run's last step.
  virtual void on_step_end(const StepPosition& /*at*/, bool /*stopping*/) {}
  virtual void on_epoch_end(const EpochReport& /*report*/) {}
  // Training is over at global step `global_step` (its epochs done, max_total_steps reached or a
  // stop signal agreed on), before the final weights are written and the summary logged. Not
  // called when a stop signal came before the first step.
  virtual void on_run_end(long /*global_step*/) {}
};

// The observers, called in the order they were added (which orders their log lines).
class StepObserverList final : public StepObserver {
 public:
  void add(std::unique_ptr<StepObserver> observer) { observers_.push_back(std::move(observer)); }

  void on_step_begin(const StepPosition& at) override {
    for (auto& o : observers_) o->on_step_begin(at);
  }
  void on_batch_ready(const StepPosition& at, int micro_batch, int micro_batches, double waited) override {
    for (auto& o : observers_) o->on_batch_ready(at, micro_batch, micro_batches, waited);
  }
  void on_losses_read(const StepPosition& at, double began) override {
    for (auto& o : observers_) o->on_losses_read(at, began);
  }
  void on_progress(const ProgressReport& report) override {
    for (auto& o : observers_) o->on_progress(report);
  }
  void on_checkpoint_written(const StepPosition& at, double began) override {
    for (auto& o : observers_) o->on_checkpoint_written(at, began);
  }
  void on_step_end(const StepPosition& at, bool stopping) override {
    for (auto& o : observers_) o->on_step_end(at, stopping);
  }
  void on_epoch_end(const EpochReport& report) override {
    for (auto& o : observers_) o->on_epoch_end(report);
  }
  void on_run_end(long global_step) override {
    for (auto& o : observers_) o->on_run_end(global_step);
  }

 private:
  std::vector<std::unique_ptr<StepObserver>> observers_;
};

}  // namespace dtrain::train
