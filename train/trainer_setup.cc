// The Trainer's construction: the data, the engine, the loaders, the schedule, the outputs and the
// observers of the loop, and the start-up checks that every rank holds the same data, config and
// parameters.
#include <algorithm>
#include <sstream>

#include "runtime/base/cli.h"
#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/base/process_identity.h"
#include "runtime/io/fingerprint.h"
#include "runtime/mpi/collective_usage_check.h"
#include "runtime/mpi/mpi_check.h"
#include "runtime/mpi/mpi_gather.h"
#include "runtime/rank/cpu_affinity.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/run_directory.h"
#include "train/config/config_text.h"
#include "train/data/datasets.h"
#include "train/engine/batch_norm_group.h"
#include "train/engine/gradient_bucket_plan.h"
#include "train/observe/step_observers.h"
#include "train/trainer.h"
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

// The log's account of gradient averaging: the bucket plan, or that one rank averages nothing.
std::string buckets_text(size_t buckets, const TrainConfig& c) {
  if (buckets == 0) return "no gradient buckets (one rank: nothing to average)";
  return comm::describe_buckets(buckets, gradient_bucket_sizes(c));
}

}  // namespace

Trainer::Trainer(const ResolvedConfig& config, const runtime::RankContext& ctx, int gpu)
    : config_(config), ctx_(ctx), parts_(std::make_unique<Parts>()) {
  Parts& p = *parts_;
  p.stall = std::make_unique<comm::StallChannel>(ctx.world());
  p.stop = std::make_unique<StopAgreement>(ctx.world(), *p.stall, p.faults);
  p.divergence = std::make_unique<DivergenceGuard>(
      DivergenceLimits{config_.fields.max_nonfinite_steps(), config_.fields.divergence_factor(),
                       config_.fields.divergence_window(), config_.fields.max_loss()},
      ctx.topology().world_rank == 0);
  const bool on_gpu = config_.device == DeviceChoice::kGpu || (config_.device == DeviceChoice::kAuto && gpu >= 0);
  open_data(on_gpu, gpu);
  build_engine(on_gpu, gpu);
  const LoaderOptions loader = build_loaders();
  build_schedule();
  open_outputs();
  if (!config_.fields.resume().empty()) resume_from(config_.fields.resume());
  // A checkpoint's weights replace any file's, so a resumed run (a requeued job with the same
  // flags) neither needs init_weights' file any more nor reads it.
  if (!config_.fields.init_weights().empty() && p.global_step == 0) init_from_weights();
  // The engine gave every rank rank 0's values (initial, resumed or imported); prove every replica agrees.
  verify_replicas();
  start_observers(on_gpu ? "GPU " + std::to_string(gpu) : std::string());
  log_start(loader);
}

void Trainer::open_data(bool on_gpu, int gpu) {
  Parts& p = *parts_;
  const runtime::Topology& t = ctx_.topology();
  // Ranks read their own copies of the data: a problem found on some ranks only (a directory
  // missing on one node) is printed once, by a rank that found it, and ends every rank.
  runtime::collective_usage_check(ctx_.world(), [&] {
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
}

void Trainer::build_engine(bool on_gpu, int gpu) {
  Parts& p = *parts_;
  const runtime::Topology& t = ctx_.topology();
  // The same verdict on every rank; printed once.
  runtime::collective_usage_check(ctx_.world(),
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
  p.engine = on_gpu ? make_gpu_step_engine(setup, ctx_, gpu) : make_cpu_step_engine(setup, ctx_);
}

LoaderOptions Trainer::build_loaders() {
  Parts& p = *parts_;
  const runtime::Topology& t = ctx_.topology();
  p.train_sampler = std::make_unique<ShardedSampler>(p.train_data->size(), t.world_size, t.world_rank,
                                                     SamplerOptions{config_.fields.seed(), true, true, true});
  p.val_sampler = std::make_unique<ShardedSampler>(p.val_data->size(), t.world_size, t.world_rank,
                                                   SamplerOptions{config_.fields.seed(), false, false, false});
  // loader_threads 0: the rank's share of the host's CPUs, less two for the step loop and the
  // driver. The batches the engine holds while their copies run come on top of the prefetch depth,
  // or the workers would have nothing to fill.
  const int threads = config_.fields.loader_threads() > 0 ? config_.fields.loader_threads()
                                                          : std::max(1, runtime::cpus_in_share(t.host_local_size) - 2);
  const int prefetch = std::max(config_.fields.prefetch_batches(), p.engine->max_batches_held() + 2);
  LoaderOptions loader{config_.fields.batch_per_rank(), threads, prefetch, config_.fields.seed(), false};
  loader.defer_decoding = p.engine->decodes_jpeg();
  p.train_loader = std::make_unique<DataLoader>(*p.train_data, *p.train_sampler, loader);
  LoaderOptions val_loader = loader;
  val_loader.keep_partial_batch = true;
  val_loader.defer_decoding = false;
  p.val_loader = std::make_unique<DataLoader>(*p.val_data, *p.val_sampler, val_loader);
  runtime::collective_usage_check(ctx_.world(), [&] {
    const int k = config_.fields.accumulation_steps();
    DTRAIN_USAGE_CHECK(p.train_loader->batches_per_epoch() >= static_cast<size_t>(k))
        << "batch_per_rank " << config_.fields.batch_per_rank() << " x " << t.world_size << " ranks"
        << (k > 1 ? " x accumulation_steps " + std::to_string(k) : std::string()) << " exceeds the "
        << p.train_data->size() << " training samples";
  });
  return loader;
}

void Trainer::build_schedule() {
  LrScheduleOptions lr;
  lr.base_lr = config_.fields.base_lr();
  // The linear scaling rule sees the effective global batch: every micro-batch of a step counts.
  lr.global_batch = static_cast<int>(global_batch());
  lr.warmup_epochs = config_.fields.warmup_epochs();
  lr.decay = config_.lr_decay;
  lr.milestones.assign(config_.fields.lr_milestones().begin(), config_.fields.lr_milestones().end());
  lr.total_epochs = config_.fields.epochs();
  parts_->schedule = std::make_unique<LinearScalingSchedule>(lr, steps_per_epoch());
}

void Trainer::open_outputs() {
  Parts& p = *parts_;
  const runtime::Topology& t = ctx_.topology();
  p.metrics = std::make_unique<MetricsLog>(t.world_rank == 0 ? config_.fields.metrics_file() : std::string());
  p.outputs.metrics_file = config_.fields.metrics_file();
  // Every rank learns of an unusable directory, before training starts.
  runtime::collective_usage_check(ctx_.world(), [&] {
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
}

void Trainer::start_observers(const std::string& device) {
  Parts& p = *parts_;
  // Now that the run's first and last steps are known, the timeline's range must lie within them.
  p.timeline = std::make_unique<Timeline>(config_, ctx_, device);
  if (p.timeline->enabled()) {
    std::string why;
    const long last = last_global_step(&why);
    runtime::collective_usage_check(ctx_.world(), [&] { p.timeline->check_run(p.global_step + 1, last, why); });
    DTRAIN_LOG0(kInfo) << "timeline: steps " << config_.fields.timeline_steps() << " of every rank to "
                       << config_.fields.timeline();
  }
  p.observers.add(std::make_unique<ProgressLine>());
  p.observers.add(std::make_unique<MetricsObserver>(*p.metrics));
  p.observers.add(std::make_unique<TensorBoardObserver>(*p.tensorboard));
  p.observers.add(std::make_unique<TimelineObserver>(*p.timeline, *p.engine, *p.stall, p.faults));
  if (!config_.fields.profile_out().empty()) add_profile_observer(device);
}

void Trainer::add_profile_observer(const std::string& device) {
  Parts& p = *parts_;
  const TrainConfig& c = config_.fields;
  const TimelineRange range = parse_timeline_steps(c.profile_steps(), runtime::flag_name("profile_steps"));
  std::string why;
  const long last = last_global_step(&why);
  // Every rank computes the same range and run, so every rank stops here alike.
  DTRAIN_USAGE_CHECK(range.first > p.global_step && range.last <= last)
      << runtime::flag_name("profile_steps") << " " << c.profile_steps() << ": the run trains steps "
      << p.global_step + 1 << " to " << last << " (" << why << ")";
  ProfileSource source;
  source.model = c.model() == "resnet" ? "resnet" + std::to_string(c.depth()) : c.model();
  source.precision = device.empty() ? "fp32" : c.precision();  // the CPU path computes in fp32
  source.device = p.engine->describe();
  source.batch_per_gpu = c.batch_per_rank();
  source.accumulation_steps = c.accumulation_steps();
  source.world_size = ctx_.topology().world_size;
  const comm::BucketSizes buckets = gradient_bucket_sizes(c);
  source.bucket_bytes = static_cast<int64_t>(buckets.body_bytes);
  source.tail_bucket_bytes = static_cast<int64_t>(buckets.tail_bytes);
  source.first_bucket_bytes = static_cast<int64_t>(buckets.first_bytes);
  p.observers.add(
      std::make_unique<ProfileObserver>(*p.engine, c.profile_out(), range, source, ctx_.topology().world_rank == 0));
  DTRAIN_LOG0(kInfo) << "profile: steps " << c.profile_steps() << " of rank 0 to " << c.profile_out();
}

void Trainer::log_start(const LoaderOptions& loader) {
  Parts& p = *parts_;
  // Collective (the hosts are gathered); rank 0 writes config.pbtxt and the metrics "run" record.
  start_run_record(config_, ctx_, p.run_id, p.global_step, p.outputs, *p.metrics);
  p.tensorboard->text("config", markdown_code_block(config_text(config_, "dtrain-train's effective config")),
                      p.global_step);
  DTRAIN_LOG0(kInfo) << "steps on " << p.engine->describe() << "; " << loader.threads << " loader threads"
                     << (config_.fields.loader_threads() > 0
                             ? std::string()
                             : " (one per CPU of the rank's share of the host, " +
                                   std::to_string(ctx_.topology().host_local_size) +
                                   " rank(s) on it, less two; --loader_threads sets it)")
                     << ", " << loader.prefetch << " batches in flight";
  DTRAIN_LOG0(kInfo) << p.schedule->describe(ctx_.topology().world_size, config_.fields.batch_per_rank(),
                                             config_.fields.accumulation_steps())
                     << "; " << p.engine->parameters().parameter_count() << " parameters in "
                     << buckets_text(p.engine->gradient_buckets(), config_.fields);
  for (const std::string& name : runtime::unread_dtrain_variables()) {
    DTRAIN_LOG0(kWarn) << name << " is set, but no dtrain tool reads it (a typo? dtrain-train's settings are its "
                       << "flags and config file; docs/configuration.md lists the variables)";
  }
  if (!config_.stall_source.empty()) {
    DTRAIN_LOG0(kInfo) << "stall inspector: " << config_.stall_source
                       << "; a collective waiting past the abort time ends the job";
  }
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

}  // namespace dtrain::train
