// The training loop: epochs of optimizer steps, each step's loss read where it is reported and
// checked for divergence, the stop agreement and checkpoints at step boundaries, and validation at
// every epoch's end. What is reported goes to the observers (step_observer.h).
#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/steady_seconds.h"
#include "runtime/base/top_level_handler.h"
#include "runtime/mpi/mpi_check.h"
#include "runtime/mpi/mpi_gather.h"
#include "train/checkpoint/checkpoint_policy.h"
#include "train/observe/run_report.h"
#include "train/trainer_collective.h"
#include "train/trainer_parts.h"

namespace dtrain::train {
namespace {

// Hands the loader back every batch the engine no longer reads.
void release_finished(StepEngine& engine, DataLoader& loader, bool wait_all) {
  for (const Batch* b : engine.finished_batches(wait_all)) loader.release(b);
}

}  // namespace

Trainer::~Trainer() {
  // An error inside the timeline's range: what this rank recorded is still worth a file (the
  // other ranks may be gone, so no gather).
  if (std::uncaught_exceptions() > 0 && parts_->timeline) parts_->timeline->write_after_error();
  if (std::uncaught_exceptions() == 0) parts_->stop->finish();
}

bool Trainer::stopped_by_signal() const {
  return parts_->stopped;
}

EpochResult Trainer::train_epoch(int epoch) {
  Parts& p = *parts_;
  const long first_step = epoch == p.start_epoch ? p.start_step_in_epoch : 0;
  start_loading(epoch, first_step);
  const long steps = steps_per_epoch();
  set_backbone_rate(epoch);
  EpochRun run(*p.engine, first_step, steps, static_cast<double>(images_before(epoch, steps)),
               config_.fields.accumulation_steps());
  // A resumed epoch reports the whole epoch: the sums of the steps before the checkpoint go on.
  if (epoch == p.start_epoch && first_step > 0) run.before = p.resumed_sums;
  p.current_run = &run;
  for (long step = first_step; step < steps && !step_limit_reached(); ++step) {
    const StepPosition at{epoch, step, steps, p.global_step + 1};
    p.observers.on_step_begin(at);
    run.timer.begin_step();
    const double lr = learning_rate(at, run.epoch_images);
    run_micro_batches(at, lr, run);
    ++p.global_step;
    const bool report = config_.fields.log_every_steps() > 0 && (step + 1) % config_.fields.log_every_steps() == 0;
    const StepLosses losses = read_losses(at, report, run);
    run.timer.end_step();
    ++p.totals.steps;
    p.totals.images += static_cast<double>(global_batch());
    if (report) report_progress(at, lr, losses, run.timer);
    if (end_step(at)) {
      p.current_run = nullptr;
      return stop_epoch(at, run);
    }
  }
  p.current_run = nullptr;
  return end_epoch(epoch, run);
}

void Trainer::start_loading(int epoch, long first_step) {
  Parts& p = *parts_;
  const size_t first_entry = epoch == p.start_epoch ? p.start_entry : 0;
  if (p.loading_epoch != epoch || first_step != 0) {
    // The loader counts batches: accumulation_steps of them make a step.
    p.train_loader->start_epoch(
        epoch, static_cast<size_t>(first_step) * static_cast<size_t>(config_.fields.accumulation_steps()), first_entry);
  }
  p.loading_epoch = -1;
}

double Trainer::learning_rate(const StepPosition& at, double epoch_images) const {
  // The schedule's position by images seen: epoch x steps + step exactly without a change of
  // world size or batch; after one, the share of the epoch's images seen, in steps.
  const long steps = at.steps;
  return parts_->schedule->lr_at(static_cast<double>(at.epoch) * static_cast<double>(steps) +
                                 static_cast<double>(steps) * static_cast<double>(images_before(at.epoch, at.step)) /
                                     epoch_images);
}

void Trainer::run_micro_batches(const StepPosition& at, double lr, EpochRun& run) {
  Parts& p = *parts_;
  const int accumulation = config_.fields.accumulation_steps();
  // The gradient all-reduce and the SGD update run on the last micro-batch only.
  for (int m = 0; m < accumulation; ++m) {
    if (m > 0) run.timer.begin_wait();
    const Batch* b = p.train_loader->next();
    const double waited = run.timer.batch_arrived();
    DTRAIN_CHECK(b != nullptr) << "loader ran dry at step " << at.step << ", micro-batch " << m + 1 << " of "
                               << accumulation;
    p.observers.on_batch_ready(at, m, accumulation, waited);
    p.engine->train_step(*b, static_cast<float>(lr), MicroBatch{m, accumulation});
    run.device_waits.host_waited(waited);
    run.device_waits.settle(false);
    p.train_loader->retain(b);
    release_finished(*p.engine, *p.train_loader, false);
  }
}

Trainer::StepLosses Trainer::read_losses(const StepPosition& at, bool report, EpochRun& run) {
  Parts& p = *parts_;
  // The GPU engine's loss waits for its step, so it is read only where it is reported.
  const bool read = report || p.engine->loss_is_free() || at.step + 1 == at.steps || step_limit_reached();
  if (!read) return {};
  const double loss = p.engine->last_loss();
  // last_loss() waited for the GPU: every gap so far can be read, so the progress line's interval
  // holds this step's wait and not the next one's.
  run.device_waits.settle(false);
  const double began = runtime::steady_seconds();
  StepLosses gathered = gather_losses(loss);
  p.divergence->check(gathered.losses, at);
  // Every rank's, so every rank holds the epoch's sums (rank 0 checkpoints them); a tolerated bad
  // step does not make the epoch's mean NaN.
  for (double l : gathered.losses) {
    if (!std::isfinite(l)) continue;
    run.loss_sum += l;
    ++run.losses_read;
  }
  p.observers.on_losses_read(at, began);
  return gathered;
}

Trainer::StepLosses Trainer::gather_losses(double loss) {
  Parts& p = *parts_;
  const size_t world = static_cast<size_t>(ctx_.topology().world_size);
  const DeviceMemory mine = p.engine->device_memory();
  const double sent[3] = {loss, mine.peak_bytes, mine.reserved_bytes};
  std::vector<double> all(3 * world);
  TrainerCollective watched(*p.stall, p.faults, "trainer: loss all-gather");
  DTRAIN_MPI_CHECK(MPI_Allgather(sent, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, ctx_.world()));
  StepLosses gathered{std::vector<double>(world), {}};  // the memory: the largest over the ranks
  for (size_t r = 0; r < world; ++r) {
    gathered.losses[r] = all[3 * r];
    gathered.memory.peak_bytes = std::max(gathered.memory.peak_bytes, all[3 * r + 1]);
    gathered.memory.reserved_bytes = std::max(gathered.memory.reserved_bytes, all[3 * r + 2]);
  }
  p.totals.device_peak_bytes = gathered.memory.peak_bytes;
  p.totals.device_reserved_bytes = gathered.memory.reserved_bytes;
  return gathered;
}

void Trainer::report_progress(const StepPosition& at, double lr, const StepLosses& losses, StepTimer& timer) {
  const int world = ctx_.topology().world_size;
  ProgressReport report;
  report.at = at;
  for (double l : losses.losses) report.loss += l;
  report.loss /= world;
  report.lr = lr;
  const StepTimer::Interval interval = timer.take_interval();
  // images/s as progress.h defines it: all ranks' images (every micro-batch) over rank 0's wall time.
  report.images_per_second = config_.fields.log_every_steps() * static_cast<double>(global_batch()) / interval.seconds;
  report.world_size = world;
  report.data_wait_fraction = interval.wait_fraction;
  long left = at.steps - (at.step + 1);
  if (config_.fields.max_total_steps() > 0) {
    left = std::min(left, config_.fields.max_total_steps() - parts_->global_step);
  }
  report.epoch_eta_seconds = timer.eta(left);
  report.device_peak_bytes = losses.memory.peak_bytes;
  report.device_reserved_bytes = losses.memory.reserved_bytes;
  parts_->observers.on_progress(report);
}

bool Trainer::end_step(const StepPosition& at) {
  Parts& p = *parts_;
  const bool stop = p.stop->agreed();
  const bool last = at.step + 1 == at.steps || step_limit_reached();
  if (stop) release_finished(*p.engine, *p.train_loader, true);
  p.position = {at.epoch, at.step + 1};
  if (checkpoint_due(config_.fields, p.global_step, last, stop)) {
    const double began = runtime::steady_seconds();
    // Only the run's last checkpoint and the one a stop signal asks for must be written; the
    // others may fail (a full disk) while the run goes on.
    const bool run_ends = stop || step_limit_reached() || (last && at.epoch + 1 >= config_.fields.epochs());
    const bool written = save_checkpoint(at.epoch, at.step + 1, false, run_ends);
    // Rank 0 writes it; the others go on.
    if (ctx_.topology().world_rank == 0 && written) p.observers.on_checkpoint_written(at, began);
  }
  p.observers.on_step_end(at, stop);
  return stop;
}

EpochResult Trainer::stop_epoch(const StepPosition& at, EpochRun& run) {
  Parts& p = *parts_;
  const bool saved = !config_.fields.checkpoint_dir().empty();
  if (const int since = p.stop->steps_since_signal(); since >= 0) {
    DTRAIN_LOG0(kInfo) << "the stop signal reached rank 0 in step " << p.global_step - since << ", " << since
                       << " step(s) before the stop";
  }
  DTRAIN_LOG0(kWarn) << "stopped by a stop signal (" << p.stop->source() << ") at step " << p.global_step << " (epoch "
                     << at.epoch << ", step " << at.step + 1 << " of " << at.steps << ")"
                     << (saved                     ? "; checkpoint written"
                         : config_.run_dir.empty() ? "; no checkpoint_dir, so nothing was saved"
                                                   : "; no checkpoint_dir: the weights go to the run directory")
                     << ", exiting with status " << runtime::kExitPreempted << " (requeue and --resume latest)";
  p.stopped = true;
  p.totals.train_seconds += run.timer.elapsed();
  EpochResult stopped;
  stopped.epoch = at.epoch;
  return stopped;
}

EpochResult Trainer::end_epoch(int epoch, EpochRun& run) {
  Parts& p = *parts_;
  release_finished(*p.engine, *p.train_loader, true);
  run.device_waits.settle(true);
  EpochResult result = epoch_totals(epoch, run);
  // The next epoch's first batches are decoded while this one is evaluated and checkpointed, so
  // the step loop does not start it waiting for an empty pipeline to fill.
  if (epoch + 1 < config_.fields.epochs() && !step_limit_reached()) {
    p.train_loader->start_epoch(epoch + 1);
    p.loading_epoch = epoch + 1;
  }
  evaluate(result);
  report_bad_files();
  p.totals.validations.push_back({epoch, result.top1, result.top5});
  p.observers.on_epoch_end({result, p.global_step, ctx_.topology().world_size, p.engine->jpeg_report()});
  return result;
}

EpochResult Trainer::epoch_totals(int epoch, EpochRun& run) {
  Parts& p = *parts_;
  // Steps this call ran: fewer than `steps` when resuming mid-epoch or stopping at max_total_steps.
  const long steps_run = std::max<long>(run.timer.steps(), 1);
  const double seconds = run.timer.elapsed();
  const double wait_fraction = run.timer.wait_fraction();
  p.totals.train_seconds += seconds;
  EpochResult result;
  result.epoch = epoch;
  // With the steps before a resume (run.before), as the uninterrupted run reports them.
  const double losses = static_cast<double>(run.losses_read + run.before.losses_read());
  result.train_loss = losses > 0 ? (run.loss_sum + run.before.loss_sum()) / losses : 0;
  result.images_per_second =
      (static_cast<double>(steps_run) * static_cast<double>(global_batch()) + run.before.images()) /
      (seconds + run.before.seconds());
  // The slowest rank's share of the epoch spent blocked on its loader.
  result.data_wait_fraction = (wait_fraction * seconds + run.before.wait_seconds()) / (seconds + run.before.seconds());
  TrainerCollective watched(*p.stall, p.faults, "trainer: epoch totals");
  DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &result.data_wait_fraction, 1, MPI_DOUBLE, MPI_MAX, ctx_.world()));
  // The median step after the warm-up steps (on a GPU, the GPU's), and the slowest rank's median
  // sets the pace.
  double median = run.timer.median_step_seconds(config_.fields.timing_warmup_steps());
  DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &median, 1, MPI_DOUBLE, MPI_MAX, ctx_.world()));
  result.median_images_per_second = median > 0 ? static_cast<double>(global_batch()) / median : 0;
  return result;
}

void Trainer::evaluate(EpochResult& result) {
  Parts& p = *parts_;
  p.val_loader->start_epoch(0);
  p.engine->begin_evaluation();
  int batches = 0;
  while (const Batch* b = p.val_loader->next()) {
    if (config_.fields.max_validation_batches() > 0 && batches++ >= config_.fields.max_validation_batches()) break;
    p.engine->evaluate(*b);
    p.val_loader->retain(b);
    release_finished(*p.engine, *p.val_loader, false);
  }
  release_finished(*p.engine, *p.val_loader, true);
  const EvalTotals mine = p.engine->end_evaluation();
  long counts[3] = {mine.top1, mine.top5, mine.images};
  double loss_sum = mine.loss_sum;
  TrainerCollective watched(*p.stall, p.faults, "trainer: evaluation totals");
  DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, counts, 3, MPI_LONG, MPI_SUM, ctx_.world()));
  DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, ctx_.world()));
  result.test_loss = counts[2] ? loss_sum / static_cast<double>(counts[2]) : 0;
  result.validation_images = counts[2];
  result.top1 = counts[2] ? static_cast<double>(counts[0]) / counts[2] : 0;
  result.top5 = counts[2] ? static_cast<double>(counts[1]) / counts[2] : 0;
  // A model whose outputs overflowed evaluates to NaN: the run failed, whatever its steps said.
  if (ctx_.topology().world_rank == 0 && !std::isfinite(result.test_loss)) {
    DTRAIN_FAIL() << "training diverged: validation loss " << result.test_loss << " after epoch " << result.epoch
                  << " (step " << p.global_step << ", " << counts[2] << " images): the model's outputs are not finite"
                  << last_good_checkpoint_text();
  }
}

void Trainer::report_bad_files() {
  for (const Dataset* data : {parts_->train_data.get(), parts_->val_data.get()}) {
    const BadFiles bad = data->bad_files();
    std::string mine;
    for (const std::string& path : bad.unreadable) mine += path + '\n';
    // Ranks meet different files (and the same file in different epochs): count distinct paths.
    const std::vector<std::string> all = runtime::gather_strings(ctx_.world(), mine);
    if (ctx_.topology().world_rank != 0) continue;
    std::set<std::string> unreadable;
    for (const std::string& list : all) {
      std::istringstream lines(list);
      for (std::string path; std::getline(lines, path);) unreadable.insert(path);
    }
    const size_t total = bad.found_by_scan + unreadable.size();
    if (total == 0) continue;
    DTRAIN_LOG(kWarn) << data->name() << ": " << bad.found_by_scan << " bad entries skipped by the scan and "
                      << unreadable.size()
                      << " unreadable files skipped by the ranks so far (each logged with its path)";
    DTRAIN_CHECK(total <= bad.allowed) << data->name() << ": " << total
                                       << " bad files in all, more than max_bad_fraction "
                                       << config_.fields.max_bad_fraction() << " allows (" << bad.allowed << ")";
  }
}

models::ParameterSet& Trainer::parameters() {
  parts_->engine->sync_to_host();
  return parts_->engine->parameters();
}

long Trainer::steps_per_epoch() const {
  const long steps = static_cast<long>(parts_->train_loader->batches_per_epoch()) / config_.fields.accumulation_steps();
  return config_.fields.max_steps_per_epoch() > 0 ? std::min<long>(steps, config_.fields.max_steps_per_epoch()) : steps;
}

long Trainer::global_batch() const {
  return images_per_rank_per_step(config_.fields) * ctx_.topology().world_size;
}

long Trainer::images_before(int epoch, long step) const {
  const Parts& p = *parts_;
  if (epoch == p.start_epoch && p.start_entry > 0) {
    return static_cast<long>(p.start_entry) + (step - p.start_step_in_epoch) * global_batch();
  }
  return step * global_batch();
}

bool Trainer::step_limit_reached() const {
  return config_.fields.max_total_steps() > 0 && parts_->global_step >= config_.fields.max_total_steps();
}

bool Trainer::stopped_before_training() {
  Parts& p = *parts_;
  if (!p.stop->agreed_before_training()) return false;
  DTRAIN_LOG0(kWarn) << "stopped by a stop signal (" << p.stop->source() << ") before training began, at step "
                     << p.global_step << "; nothing new to save, exiting with status " << runtime::kExitPreempted
                     << " (requeue and --resume latest)";
  p.stopped = true;
  return true;
}

void Trainer::run() {
  Parts& p = *parts_;
  if (stopped_before_training()) return;
  for (int epoch = p.start_epoch; epoch < config_.fields.epochs() && !step_limit_reached() && !p.stopped; ++epoch) {
    train_epoch(epoch);
  }
  p.stop->finish();
  p.observers.on_run_end(p.global_step);
  // Nothing trained is lost by default: without checkpoint_dir the weights go to the run directory.
  if (config_.fields.checkpoint_dir().empty() && !config_.run_dir.empty() && p.totals.steps > 0) {
    save_checkpoint(p.position.first, p.position.second, true);
  }
  log_run_summary(config_, ctx_, p.outputs, p.totals, p.stopped, *p.metrics);
}

}  // namespace dtrain::train
