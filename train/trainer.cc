#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "comm/diagnostics/fault_injection.h"
#include "comm/diagnostics/stall_inspector.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/io/fingerprint.h"
#include "runtime/mpi/collective_usage_check.h"
#include "runtime/mpi/main_guard.h"
#include "runtime/mpi/mpi_check.h"
#include "runtime/mpi/mpi_gather.h"
#include "runtime/rank/cpu_affinity.h"
#include "runtime/rank/stop_signals.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_policy.h"
#include "train/checkpoint/run_directory.h"
#include "train/config/config_text.h"
#include "train/data/datasets.h"
#include "train/engine/batch_norm_group.h"
#include "train/observe/metrics_log.h"
#include "train/observe/progress.h"
#include "train/observe/run_report.h"
#include "train/observe/tensorboard_writer.h"
#include "train/observe/timeline.h"
#include "train/trainer_collective.h"
#include "train/trainer_parts.h"

namespace dtrain::train {
namespace {

// `text` as a markdown code block (every line indented by four spaces), for TensorBoard's text
// dashboard, which would otherwise render a text-format config as one paragraph.
std::string markdown_code_block(const std::string& text) {
  std::string out = "    ";
  for (const char c : text) {
    out += c;
    if (c == '\n') out += "    ";
  }
  return out;
}

// The log's account of gradient averaging: the buckets, or that one rank averages nothing.
std::string buckets_text(size_t buckets, int bucket_mib) {
  if (buckets == 0) return "no gradient buckets (one rank: nothing to average)";
  return std::to_string(buckets) + " gradient bucket(s) of up to " + std::to_string(bucket_mib) + " MiB";
}

// Hands the loader back every batch the engine no longer reads.
void release_finished(StepEngine& engine, DataLoader& loader, bool wait_all) {
  for (const Batch* b : engine.finished_batches(wait_all)) loader.release(b);
}

}  // namespace

Trainer::Trainer(const ResolvedConfig& config, const runtime::RankContext& ctx, int gpu)
    : config_(config), ctx_(ctx), parts_(std::make_unique<Parts>()) {
  Parts& p = *parts_;
  const runtime::Topology& t = ctx.topology();
  p.stall = std::make_unique<comm::StallChannel>(ctx.world());
  const bool on_gpu = config_.device == DeviceChoice::kGpu || (config_.device == DeviceChoice::kAuto && gpu >= 0);
  // Ranks read their own copies of the data: a problem found on some ranks only (a directory
  // missing on one node) is printed once, by a rank that found it, and ends every rank.
  runtime::collective_usage_check(ctx.world(), [&] {
    Datasets datasets = open_datasets(config_);
    p.train_data = std::move(datasets.train);
    p.val_data = std::move(datasets.validation);
    DTRAIN_USAGE_CHECK(!on_gpu || gpu >= 0)
        << "device gpu, but rank " << t.world_rank << " on host " << runtime::process_identity().host << " has no GPU";
    DTRAIN_USAGE_CHECK(on_gpu || config_.jpeg_decoder != JpegDecoder::kGpu)
        << "jpeg_decoder gpu needs a GPU, but rank " << t.world_rank << " on host " << runtime::process_identity().host
        << " steps on the CPU";
  });
  check_datasets_agree();
  p.train_data->normalization(p.mean, p.std);

  // The same verdict on every rank; printed once.
  runtime::collective_usage_check(ctx.world(),
                                  [&] { check_bn_sync_group(config_.fields.bn_sync_group(), t.world_size); });
  if (config_.fields.bn_sync_group() > 1) {
    DTRAIN_LOG0(kInfo) << "synchronized batch norm: " << t.world_size / config_.fields.bn_sync_group()
                       << " group(s) of " << config_.fields.bn_sync_group()
                       << " consecutive ranks; every BN layer waits for its group in forward and backward";
  }

  EngineSetup setup;
  setup.config = config_;
  setup.model = resnet_config(config_, p.train_data->num_classes(), p.train_data->output_shape().channels);
  setup.image = p.train_data->output_shape();
  std::copy(p.mean, p.mean + 3, setup.mean);
  std::copy(p.std, p.std + 3, setup.std);
  p.engine = on_gpu ? make_gpu_step_engine(setup, ctx, gpu) : make_cpu_step_engine(setup, ctx);

  p.train_sampler = std::make_unique<ShardedSampler>(p.train_data->size(), t.world_size, t.world_rank,
                                                     SamplerOptions{config_.fields.seed(), true, true, true});
  p.val_sampler = std::make_unique<ShardedSampler>(p.val_data->size(), t.world_size, t.world_rank,
                                                   SamplerOptions{config_.fields.seed(), false, false, false});
  // loader_threads 0: the CPUs this rank may use (its share of the host), less two for the step
  // loop and the driver. The batches the engine holds while their copies run come on top of the
  // prefetch depth, or the workers would have nothing to fill.
  const int threads =
      config_.fields.loader_threads() > 0 ? config_.fields.loader_threads() : std::max(1, runtime::cpus_allowed() - 2);
  const int prefetch = std::max(config_.fields.prefetch_batches(), p.engine->max_batches_held() + 2);
  LoaderOptions loader{config_.fields.batch_per_rank(), threads, prefetch, config_.fields.seed(), false};
  loader.defer_decoding = p.engine->decodes_jpeg();
  p.train_loader = std::make_unique<DataLoader>(*p.train_data, *p.train_sampler, loader);
  LoaderOptions val_loader = loader;
  val_loader.keep_partial_batch = true;
  val_loader.defer_decoding = false;
  p.val_loader = std::make_unique<DataLoader>(*p.val_data, *p.val_sampler, val_loader);
  runtime::collective_usage_check(ctx.world(), [&] {
    const int k = config_.fields.accumulation_steps();
    DTRAIN_USAGE_CHECK(p.train_loader->batches_per_epoch() >= static_cast<size_t>(k))
        << "batch_per_rank " << config_.fields.batch_per_rank() << " x " << t.world_size << " ranks"
        << (k > 1 ? " x accumulation_steps " + std::to_string(k) : std::string()) << " exceeds the "
        << p.train_data->size() << " training samples";
  });

  LrScheduleOptions lr;
  lr.base_lr = config_.fields.base_lr();
  // The linear scaling rule sees the effective global batch: every micro-batch of a step counts.
  lr.global_batch = static_cast<int>(global_batch());
  lr.warmup_epochs = config_.fields.warmup_epochs();
  lr.decay = config_.lr_decay;
  lr.milestones.assign(config_.fields.lr_milestones().begin(), config_.fields.lr_milestones().end());
  lr.total_epochs = config_.fields.epochs();
  p.schedule = std::make_unique<LinearScalingSchedule>(lr, steps_per_epoch());
  p.metrics = std::make_unique<MetricsLog>(t.world_rank == 0 ? config_.fields.metrics_file() : std::string());
  p.outputs.metrics_file = config_.fields.metrics_file();
  // Every rank learns of an unusable directory, before training starts.
  runtime::collective_usage_check(ctx.world(), [&] {
    p.tensorboard =
        std::make_unique<TensorBoardWriter>(t.world_rank == 0 ? config_.fields.tensorboard_dir() : std::string());
  });
  p.outputs.tensorboard_file = p.tensorboard->path();

  if (t.world_rank == 0) {
    p.run_id = new_run_id();
    if (!config_.fields.checkpoint_dir().empty()) prepare_checkpoint_dir();
    // Before training, so an unwritable run_dir stops the job at once, naming it.
    if (!config_.run_dir.empty()) p.outputs.run_dir = prepare_run_dir(config_.run_dir, config_.fresh_run_dir);
  }
  if (!config_.fields.resume().empty()) resume_from(config_.fields.resume());
  // A checkpoint's weights replace any file's, so a resumed run (a requeued job with the same
  // flags) neither needs init_weights' file any more nor reads it.
  if (!config_.fields.init_weights().empty() && p.global_step == 0) init_from_weights();
  // The engine gave every rank rank 0's values (initial, resumed or imported); prove every replica agrees.
  verify_replicas();
  // Now that the run's first and last steps are known, the timeline's range must lie within them.
  p.timeline = std::make_unique<Timeline>(config_, ctx, on_gpu ? "GPU " + std::to_string(gpu) : std::string());
  if (p.timeline->enabled()) {
    std::string why;
    const long last = last_global_step(&why);
    runtime::collective_usage_check(ctx.world(), [&] { p.timeline->check_run(p.global_step + 1, last, why); });
    DTRAIN_LOG0(kInfo) << "timeline: steps " << config_.fields.timeline_steps() << " of every rank to "
                       << config_.fields.timeline();
  }
  // Collective (the hosts are gathered); rank 0 writes config.pbtxt and the metrics "run" record.
  start_run_record(config_, ctx_, p.run_id, p.global_step, p.outputs, *p.metrics);
  p.tensorboard->text("config", markdown_code_block(config_text(config_, "dtrain-train's effective config")),
                      p.global_step);
  DTRAIN_LOG0(kInfo) << "steps on " << p.engine->describe() << "; " << threads << " loader threads, " << prefetch
                     << " batches in flight";
  DTRAIN_LOG0(kInfo) << p.schedule->describe(t.world_size, config_.fields.batch_per_rank(),
                                             config_.fields.accumulation_steps())
                     << "; " << p.engine->parameters().parameter_count() << " parameters in "
                     << buckets_text(p.engine->gradient_buckets(), config_.fields.bucket_mib());
}

Trainer::~Trainer() {
  // An error inside the timeline's range: what this rank recorded is still worth a file (the
  // other ranks may be gone, so no gather).
  if (std::uncaught_exceptions() > 0 && parts_->timeline) parts_->timeline->write_after_error();
  // Every rank posted the same requests, so completing the last one cannot block for long.
  if (std::uncaught_exceptions() == 0) finish_stop_poll();
}

long Trainer::last_global_step(std::string* why) const {
  const Parts& p = *parts_;
  const long steps = steps_per_epoch();
  long last = p.global_step;
  for (int epoch = p.start_epoch; epoch < config_.fields.epochs(); ++epoch) {
    last += steps - (epoch == p.start_epoch ? p.start_step_in_epoch : 0);
  }
  *why = std::to_string(config_.fields.epochs()) + " epoch(s) of " + std::to_string(steps) + " steps";
  if (config_.fields.max_total_steps() > 0 && config_.fields.max_total_steps() < last) {
    last = config_.fields.max_total_steps();
    *why = "max_total_steps " + std::to_string(last);
  }
  return last;
}

void Trainer::write_timeline(const std::string& ending) {
  Parts& p = *parts_;
  p.engine->flush_timeline();  // the GPU's events into host times: one wait, after the range
  p.timeline->write(*p.stall, p.faults, ending);
}

void Trainer::finish_stop_poll() {
  if (parts_->stop_request == MPI_REQUEST_NULL) return;
  TrainerCollective watched(*parts_->stall, parts_->faults, "trainer: stop-signal agreement (last step)");
  DTRAIN_MPI_CHECK(MPI_Wait(&parts_->stop_request, MPI_STATUS_IGNORE));
}

bool Trainer::stop_agreed() {
  Parts& p = *parts_;
  if (p.stop_request != MPI_REQUEST_NULL) {
    // Posted a step ago: by now every rank has long posted it too.
    TrainerCollective watched(*p.stall, p.faults, "trainer: stop-signal agreement");
    DTRAIN_MPI_CHECK(MPI_Wait(&p.stop_request, MPI_STATUS_IGNORE));
    if (p.stop_any != 0) return true;
  }
  p.stop_mine = runtime::stop_signal_received();
  DTRAIN_MPI_CHECK(MPI_Iallreduce(&p.stop_mine, &p.stop_any, 1, MPI_INT, MPI_MAX, ctx_.world(), &p.stop_request));
  return false;
}

bool Trainer::stopped_by_signal() const {
  return parts_->stopped;
}

void Trainer::check_datasets_agree() {
  const Parts& p = *parts_;
  const uint64_t mine[4] = {p.train_data->size(), p.train_data->listing_fingerprint(), p.val_data->size(),
                            p.val_data->listing_fingerprint()};
  const int n = ctx_.topology().world_size;
  std::vector<uint64_t> all(4 * static_cast<size_t>(n));
  DTRAIN_MPI_CHECK(MPI_Allgather(mine, 4, MPI_UINT64_T, all.data(), 4, MPI_UINT64_T, ctx_.world()));
  bool same = true;
  for (size_t i = 4; i < all.size(); ++i) same = same && all[i] == all[i % 4];
  if (same) return;
  // Every rank knows; the hosts are gathered only now, and rank 0 names who holds what.
  const std::vector<std::string> hosts = runtime::gather_strings(ctx_.world(), runtime::process_identity().host);
  std::string error;
  if (ctx_.topology().world_rank == 0) {
    std::ostringstream text;
    text << "the ranks hold different datasets (the data must be the same files on every node):";
    for (int split = 0; split < 2; ++split) {
      // Ranks grouped by what they hold, in order of the lowest rank holding it.
      std::vector<std::pair<size_t, std::string>> groups;
      for (int r = 0; r < n; ++r) {
        const size_t at = 4 * size_t(r) + 2 * size_t(split);
        size_t g = 0;
        while (g < groups.size() && (all[4 * groups[g].first + 2 * size_t(split)] != all[at] ||
                                     all[4 * groups[g].first + 2 * size_t(split) + 1] != all[at + 1]))
          ++g;
        if (g == groups.size()) groups.push_back({size_t(r), ""});
        groups[g].second += (groups[g].second.empty() ? "" : ", ") + std::to_string(r) + " (" + hosts[size_t(r)] + ")";
      }
      if (groups.size() == 1) continue;
      text << (split == 0 ? " training data " + p.train_data->name() : " validation data " + p.val_data->name()) << ":";
      for (size_t g = 0; g < groups.size(); ++g) {
        const size_t at = 4 * groups[g].first + 2 * size_t(split);
        text << (g ? ";" : "") << " rank(s) " << groups[g].second << " have " << all[at] << " samples (listing "
             << std::hex << all[at + 1] << std::dec << ")";
      }
      text << ".";
    }
    error = text.str();
  }
  runtime::throw_usage_error_once(ctx_.world(), error.empty() ? nullptr : &error, __FILE__, __LINE__, false);
}

void Trainer::verify_replicas() {
  // The GPU engine's host mirror is refreshed from the device first, so this proves the device
  // replicas agree after the broadcast, not only that the seeds did.
  parts_->engine->sync_to_host();
  models::ParameterSet& params = parts_->engine->parameters();
  const std::string config_bytes = config_.fields.SerializeAsString();
  const uint64_t mine[2] = {runtime::fingerprint(params.params_flat(), static_cast<size_t>(params.flat_size()) * 4),
                            runtime::fingerprint(config_bytes.data(), config_bytes.size())};
  const int n = ctx_.topology().world_size;
  std::vector<uint64_t> all(2 * static_cast<size_t>(n));
  DTRAIN_MPI_CHECK(MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, ctx_.world()));
  std::ostringstream differ;
  for (int r = 1; r < n; ++r) {
    if (all[2 * size_t(r)] != all[0]) differ << " rank " << r << " has different parameters than rank 0;";
    if (all[2 * size_t(r) + 1] != all[1]) differ << " rank " << r << " has a different config than rank 0;";
  }
  DTRAIN_CHECK(differ.str().empty()) << "replicas disagree at start:" << differ.str()
                                     << " (every rank must run the same binary, config and flags)";
}

void Trainer::report_progress(int epoch, long step, long steps, double lr, const std::vector<double>& losses,
                              const DeviceMemory& memory, StepTimer& timer) {
  Parts& p = *parts_;
  const int world = ctx_.topology().world_size;
  double mean_loss = 0;
  for (double l : losses) mean_loss += l;
  mean_loss /= world;
  const StepTimer::Interval interval = timer.take_interval();
  // images/s as progress.h defines it: all ranks' images (every micro-batch) over rank 0's wall time.
  const double rate = config_.fields.log_every_steps() * static_cast<double>(global_batch()) / interval.seconds;
  const double wait = interval.wait_fraction;
  long left = steps - (step + 1);
  if (config_.fields.max_total_steps() > 0) left = std::min(left, config_.fields.max_total_steps() - p.global_step);
  const double eta = timer.eta(left);
  std::ostringstream gpu;
  if (memory.peak_bytes > 0) {
    gpu << ", GPU memory " << format_gib(memory.peak_bytes) << " peak, " << format_gib(memory.reserved_bytes)
        << " reserved";
  }
  // "epoch E step S/T": S counts the epoch's optimizer steps; the records' "step" is the global step.
  DTRAIN_LOG0(kInfo) << "epoch " << epoch << " step " << step + 1 << "/" << steps << " loss " << mean_loss << " lr "
                     << lr << ", " << static_cast<long>(rate) << " images/s (" << static_cast<long>(rate / world)
                     << " per rank), data wait " << std::round(1000 * wait) / 10 << "%, epoch ETA "
                     << format_duration(eta) << gpu.str() << " (global step " << p.global_step << ")";
  std::vector<std::pair<std::string, double>> record = {{"epoch", epoch},
                                                        {"step", static_cast<double>(p.global_step)},
                                                        {"epoch_step", static_cast<double>(step + 1)},
                                                        {"epoch_steps", static_cast<double>(steps)},
                                                        {"loss", mean_loss},
                                                        {"lr", lr},
                                                        {"img_per_sec", rate},
                                                        {"img_per_sec_per_rank", rate / world},
                                                        {"data_wait_fraction", wait},
                                                        {"epoch_eta_seconds", eta}};
  if (memory.peak_bytes > 0) {
    record.insert(record.end(), {{"gpu_peak_bytes", memory.peak_bytes}, {"gpu_reserved_bytes", memory.reserved_bytes}});
  }
  p.metrics->write("train", record);
  p.tensorboard->scalar("train/loss", mean_loss, p.global_step);
  p.tensorboard->scalar("train/lr", lr, p.global_step);
  p.tensorboard->scalar("train/images_per_sec", rate, p.global_step);
  p.tensorboard->scalar("train/data_wait_fraction", wait, p.global_step);
}

EpochResult Trainer::train_epoch(int epoch) {
  Parts& p = *parts_;
  const int accumulation = config_.fields.accumulation_steps();
  const long first_step = epoch == p.start_epoch ? p.start_step_in_epoch : 0;
  const size_t first_entry = epoch == p.start_epoch ? p.start_entry : 0;
  if (p.loading_epoch != epoch || first_step != 0) {
    // The loader counts batches: accumulation_steps of them make a step.
    p.train_loader->start_epoch(epoch, static_cast<size_t>(first_step) * static_cast<size_t>(accumulation),
                                first_entry);
  }
  p.loading_epoch = -1;
  const long steps = steps_per_epoch();
  const double epoch_images = static_cast<double>(images_before(epoch, steps));  // this epoch's, in all
  set_backbone_rate(epoch);

  double loss_sum = 0;  // over the steps whose loss was read
  long losses_read = 0;
  StepTimer timer;
  // The data wait on a GPU: the host queues steps ahead of the GPU, so a batch it waited for may
  // still have been in time. A micro-batch's wait counts as far as the GPU was idle before it:
  // min(the host's wait, the GPU's idle gap), paired in order as the engine reads its events.
  const bool waits_on_device = p.engine->waits_on_device();
  if (waits_on_device) timer.count_waits_on_device();
  DeviceWaitPairing device_waits;
  auto settle_device_waits = [&](bool all) {
    if (waits_on_device) timer.add_device_wait(device_waits.pair(p.engine->take_device_idle(all)));
  };
  for (long step = first_step; step < steps && !step_limit_reached(); ++step) {
    // Inside the timeline's range: this step's spans (the step loop's here, the engine's phases).
    const long this_step = p.global_step + 1;
    TimelineRecorder* trace = p.timeline->recorder_for(this_step);
    const double step_began = trace ? runtime::steady_seconds() : 0;
    timer.begin_step();
    if (trace) p.timeline->mark_started();
    // The schedule's position by images seen: epoch x steps + step exactly without a change of
    // world size or batch; after one, the share of the epoch's images seen, in steps.
    const double lr =
        p.schedule->lr_at(static_cast<double>(epoch) * static_cast<double>(steps) +
                          static_cast<double>(steps) * static_cast<double>(images_before(epoch, step)) / epoch_images);
    // One optimizer step: accumulation_steps micro-batches, the gradient all-reduce and the SGD
    // update on the last one only.
    for (int m = 0; m < accumulation; ++m) {
      const double wait_began = trace && m > 0 ? runtime::steady_seconds() : step_began;
      if (m > 0) timer.begin_wait();
      const Batch* b = p.train_loader->next();
      const double waited = timer.batch_arrived();
      DTRAIN_CHECK(b != nullptr) << "loader ran dry at step " << step << ", micro-batch " << m + 1 << " of "
                                 << accumulation;
      if (trace) {
        trace->add({TimelineTrack::kStepLoop, "data wait", this_step, wait_began, runtime::steady_seconds(), -1, -1,
                    accumulation > 1 ? m : -1});
        p.engine->trace_next_step(trace, this_step);
      }
      p.engine->train_step(*b, static_cast<float>(lr), MicroBatch{m, accumulation});
      if (waits_on_device) device_waits.host_waited(waited);
      settle_device_waits(false);
      p.train_loader->retain(b);
      release_finished(*p.engine, *p.train_loader, false);
    }
    ++p.global_step;
    // The GPU engine's loss waits for its step, so it is read only where it is reported.
    const bool report = config_.fields.log_every_steps() > 0 && (step + 1) % config_.fields.log_every_steps() == 0;
    const bool read = report || p.engine->loss_is_free() || step + 1 == steps || step_limit_reached();
    const double loss = read ? p.engine->last_loss() : 0.0;
    // last_loss() waited for the GPU: every gap so far can be read, so the progress line's interval
    // holds this step's wait and not the next one's.
    if (read) settle_device_waits(false);
    const int world = ctx_.topology().world_size;
    std::vector<double> losses(static_cast<size_t>(world));
    DeviceMemory memory;  // the largest over the ranks
    const double read_began = trace ? runtime::steady_seconds() : 0;
    if (read) {
      // Every rank's loss, for the divergence guard and the reported mean, with its device memory.
      const DeviceMemory mine = p.engine->device_memory();
      const double sent[3] = {loss, mine.peak_bytes, mine.reserved_bytes};
      std::vector<double> all(3 * static_cast<size_t>(world));
      TrainerCollective watched(*p.stall, p.faults, "trainer: loss all-gather");
      DTRAIN_MPI_CHECK(MPI_Allgather(sent, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, ctx_.world()));
      for (size_t r = 0; r < losses.size(); ++r) {
        losses[r] = all[3 * r];
        memory.peak_bytes = std::max(memory.peak_bytes, all[3 * r + 1]);
        memory.reserved_bytes = std::max(memory.reserved_bytes, all[3 * r + 2]);
      }
      check_losses(losses, epoch, step, steps);
      if (std::isfinite(loss)) {  // a tolerated bad step does not make the epoch's mean NaN
        loss_sum += loss;
        ++losses_read;
      }
      // On the GPU the host waits for the step here (the loss is read back only where it is logged).
      if (trace)
        trace->add({TimelineTrack::kStepLoop, "loss read-back", this_step, read_began, runtime::steady_seconds()});
    }
    timer.end_step();
    ++p.totals.steps;
    p.totals.images += static_cast<double>(global_batch());
    if (report) report_progress(epoch, step, steps, lr, losses, memory, timer);
    const bool stop = stop_agreed();
    const bool last = step + 1 == steps || step_limit_reached();
    if (stop) release_finished(*p.engine, *p.train_loader, true);
    p.position = {epoch, step + 1};
    if (checkpoint_due(config_.fields, p.global_step, last, stop)) {
      const double write_began = trace ? runtime::steady_seconds() : 0;
      save_checkpoint(epoch, step + 1);
      if (trace && ctx_.topology().world_rank == 0) {  // rank 0 writes it; the others go on
        trace->add({TimelineTrack::kStepLoop, "checkpoint write", this_step, write_began, runtime::steady_seconds()});
      }
    }
    if (trace) trace->add({TimelineTrack::kStepLoop, "step", this_step, step_began, runtime::steady_seconds()});
    // The range's end, or a stop signal inside it: every rank is here at the same step.
    if (p.timeline->pending() && (this_step == p.timeline->last_step() || stop)) {
      write_timeline(stop ? "stopped by a stop signal at step " + std::to_string(this_step) : std::string());
    }
    if (stop) {
      const bool saved = !config_.fields.checkpoint_dir().empty();
      DTRAIN_LOG0(kWarn) << "stopped by a stop signal ("
                         << (p.stop_mine ? runtime::signal_name(p.stop_mine) : "on another rank") << ") at step "
                         << p.global_step << " (epoch " << epoch << ", step " << step + 1 << " of " << steps << ")"
                         << (saved                     ? "; checkpoint written"
                             : config_.run_dir.empty() ? "; no checkpoint_dir, so nothing was saved"
                                                       : "; no checkpoint_dir: the weights go to the run directory")
                         << ", exiting with status " << runtime::kExitPreempted << " (requeue and --resume latest)";
      p.stopped = true;
      p.totals.train_seconds += timer.elapsed();
      EpochResult stopped;
      stopped.epoch = epoch;
      return stopped;
    }
  }
  release_finished(*p.engine, *p.train_loader, true);
  settle_device_waits(true);
  // Steps this call ran: fewer than `steps` when resuming mid-epoch or stopping at max_total_steps.
  const long steps_run = std::max<long>(timer.steps(), 1);
  const double seconds = timer.elapsed();
  const double wait_fraction = timer.wait_fraction();
  p.totals.train_seconds += seconds;
  EpochResult result;
  result.epoch = epoch;
  double totals[2] = {loss_sum, static_cast<double>(losses_read)};
  std::optional<TrainerCollective> watched(std::in_place, *p.stall, p.faults, "trainer: epoch totals");
  DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_DOUBLE, MPI_SUM, ctx_.world()));
  result.train_loss = totals[1] > 0 ? totals[0] / totals[1] : 0;
  result.images_per_second = static_cast<double>(steps_run) * static_cast<double>(global_batch()) / seconds;
  // The slowest rank's share of the epoch spent blocked on its loader.
  result.data_wait_fraction = wait_fraction;
  DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &result.data_wait_fraction, 1, MPI_DOUBLE, MPI_MAX, ctx_.world()));
  // The median step after the warm-up steps, and the slowest rank's median sets the pace.
  double median = timer.median_step_seconds(config_.fields.timing_warmup_steps());
  DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &median, 1, MPI_DOUBLE, MPI_MAX, ctx_.world()));
  watched.reset();
  result.median_images_per_second = median > 0 ? static_cast<double>(global_batch()) / median : 0;
  // The next epoch's first batches are decoded while this one is evaluated and checkpointed, so
  // the step loop does not start it waiting for an empty pipeline to fill.
  if (epoch + 1 < config_.fields.epochs() && !step_limit_reached()) {
    p.train_loader->start_epoch(epoch + 1);
    p.loading_epoch = epoch + 1;
  }
  evaluate(result);
  report_bad_files();
  p.totals.validations.push_back({epoch, result.top1, result.top5});
  const int world = ctx_.topology().world_size;
  DTRAIN_LOG0(kInfo) << "epoch " << epoch << ": train loss " << result.train_loss << ", validation loss "
                     << result.test_loss << " top-1 " << 100 * result.top1 << "% top-5 " << 100 * result.top5 << "% ("
                     << result.validation_images << " images), " << static_cast<long>(result.median_images_per_second)
                     << " images/s (" << static_cast<long>(result.median_images_per_second / world)
                     << " per rank) at the median step, data wait " << 100 * result.data_wait_fraction << "%";
  if (const std::string jpegs = p.engine->jpeg_report(); !jpegs.empty()) {
    DTRAIN_LOG0(kInfo) << jpegs;
  }
  p.metrics->write("validation", {{"epoch", epoch},
                                  {"step", static_cast<double>(p.global_step)},
                                  {"train_loss", result.train_loss},
                                  {"loss", result.test_loss},
                                  {"top1", result.top1},
                                  {"top5", result.top5},
                                  {"images", static_cast<double>(result.validation_images)},
                                  {"img_per_sec", result.median_images_per_second},
                                  {"img_per_sec_per_rank", result.median_images_per_second / world},
                                  {"data_wait_fraction", result.data_wait_fraction}});
  p.tensorboard->scalar("validation/top1", result.top1, p.global_step);
  p.tensorboard->scalar("validation/top5", result.top5, p.global_step);
  p.tensorboard->scalar("validation/loss", result.test_loss, p.global_step);
  p.tensorboard->scalar("train/epoch_loss", result.train_loss, p.global_step);
  p.tensorboard->scalar("train/epoch_images_per_sec", result.median_images_per_second, p.global_step);
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

void Trainer::check_losses(const std::vector<double>& losses, int epoch, long step, long steps) {
  Parts& p = *parts_;
  std::ostringstream bad;
  int bad_ranks = 0;
  for (size_t r = 0; r < losses.size(); ++r) {
    if (!std::isfinite(losses[r])) bad << (bad_ranks++ ? ", " : "") << r << " (" << losses[r] << ")";
  }
  if (bad_ranks == 0) {
    p.nonfinite_streak = 0;
    return;
  }
  ++p.nonfinite_streak;
  if (ctx_.topology().world_rank != 0) return;
  const int allowed = config_.fields.max_nonfinite_steps();
  if (p.nonfinite_streak > allowed) {
    DTRAIN_FAIL() << "training diverged: non-finite loss at step " << p.global_step << " (epoch " << epoch << ", step "
                  << step + 1 << " of " << steps << ") on rank(s) " << bad.str() << "; " << p.nonfinite_streak
                  << " check(s) in a row, more than max_nonfinite_steps " << allowed
                  << " tolerates (lower base_lr, or raise max_nonfinite_steps)";
  }
  DTRAIN_LOG(kWarn) << "non-finite loss at step " << p.global_step << " (epoch " << epoch << ", step " << step + 1
                    << " of " << steps << ") on rank(s) " << bad.str() << ": " << p.nonfinite_streak << " in a row, "
                    << allowed << " tolerated (max_nonfinite_steps)";
}

bool Trainer::stopped_before_training() {
  Parts& p = *parts_;
  p.stop_mine = runtime::stop_signal_received();
  {
    TrainerCollective watched(*p.stall, p.faults, "trainer: stop-signal agreement (before training)");
    DTRAIN_MPI_CHECK(MPI_Allreduce(&p.stop_mine, &p.stop_any, 1, MPI_INT, MPI_MAX, ctx_.world()));
  }
  if (p.stop_any == 0) return false;
  DTRAIN_LOG0(kWarn) << "stopped by a stop signal ("
                     << (p.stop_mine ? runtime::signal_name(p.stop_mine) : "on another rank")
                     << ") before training began, at step " << p.global_step
                     << "; nothing new to save, exiting with status " << runtime::kExitPreempted
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
  finish_stop_poll();
  // The range lies within the run (checked at start), so only a run that ended otherwise than
  // planned leaves spans here.
  if (p.timeline->pending()) write_timeline("the run ended at step " + std::to_string(p.global_step));
  // Nothing trained is lost by default: without checkpoint_dir the weights go to the run directory.
  if (config_.fields.checkpoint_dir().empty() && !config_.run_dir.empty() && p.totals.steps > 0) {
    save_checkpoint(p.position.first, p.position.second, true);
  }
  log_run_summary(config_, ctx_, p.outputs, p.totals, p.stopped, *p.metrics);
}

}  // namespace dtrain::train
