#include "train/config/resolved_config.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/diagnostics/stall_inspector.h"
#include "runtime/base/cli.h"
#include "runtime/base/error.h"
#include "runtime/rank/stop_signals.h"
#include "train/config/config_limits.h"
#include "train/observe/timeline_events.h"

namespace dtrain::train {
namespace {

// The choice named `text` among `choices` (name, value); a UsageError naming the field otherwise.
template <typename T>
T choose(std::string_view field, const std::string& text, const std::vector<std::pair<const char*, T>>& choices) {
  std::string names;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (text == choices[i].first) return choices[i].second;
    names += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + std::string(choices[i].first);
  }
  DTRAIN_USAGE_FAIL() << field << " '" << text << "': use " << names;
}

// The fields that name a choice, parsed into their types.
void parse_choices(const TrainConfig& c, ResolvedConfig& r) {
  r.model = choose<ModelKind>("model", c.model(),
                              {{"resnet", ModelKind::kResNet}, {"small-resnet", ModelKind::kSmallResNet}});
  r.dataset = choose<DatasetKind>("dataset", c.dataset(),
                                  {{"imagenet", DatasetKind::kImageNet},
                                   {"fashion-mnist", DatasetKind::kFashionMnist},
                                   {"synthetic", DatasetKind::kSynthetic}});
  r.device = choose<DeviceChoice>(
      "device", c.device(), {{"auto", DeviceChoice::kAuto}, {"cpu", DeviceChoice::kCpu}, {"gpu", DeviceChoice::kGpu}});
  r.precision = choose<Precision>("precision", c.precision(), {{"bf16", Precision::kBf16}, {"fp32", Precision::kFp32}});
  r.jpeg_decoder =
      choose<JpegDecoder>("jpeg_decoder", c.jpeg_decoder(), {{"cpu", JpegDecoder::kCpu}, {"gpu", JpegDecoder::kGpu}});
  r.lr_decay =
      choose<DecayKind>("lr_decay", c.lr_decay(), {{"step", DecayKind::kStep}, {"cosine", DecayKind::kCosine}});
  r.backend = comm::parse_backend(c.backend(), "backend");
  // auto stays unresolved until the layout is known (comm::choose_wire, in the communicator's log).
  r.gradient_wire_dtype = choose<std::optional<runtime::DType>>("gradient_wire_dtype", c.gradient_wire_dtype(),
                                                                {{"auto", std::nullopt},
                                                                 {"fp32", runtime::DType::kF32},
                                                                 {"bf16", runtime::DType::kBF16},
                                                                 {"fp16", runtime::DType::kF16}});
}

// The dataset, its input pipeline and the model it fits.
void check_data(const TrainConfig& c, const ResolvedConfig& r) {
  DTRAIN_USAGE_CHECK(r.jpeg_decoder != JpegDecoder::kGpu ||
                     (r.dataset == DatasetKind::kImageNet && r.device != DeviceChoice::kCpu))
      << "jpeg_decoder gpu decodes imagenet's JPEGs on the GPU; this run has dataset " << c.dataset() << " and device "
      << c.device();
  DTRAIN_USAGE_CHECK(r.dataset != DatasetKind::kImageNet || !c.data_dir().empty())
      << "dataset imagenet needs data_dir (holding train/ and val/)";
  DTRAIN_USAGE_CHECK(c.image_size() > 0) << "image_size must be positive, got " << c.image_size();
  DTRAIN_USAGE_CHECK(r.dataset != DatasetKind::kImageNet || c.val_resize() >= c.image_size())
      << "val_resize " << c.val_resize() << " is smaller than the crop image_size " << c.image_size();
  DTRAIN_USAGE_CHECK(c.synthetic_samples() >= 0 && (r.dataset != DatasetKind::kSynthetic || c.synthetic_samples() > 0))
      << "synthetic_samples must be positive, got " << c.synthetic_samples();
  DTRAIN_USAGE_CHECK(c.max_bad_fraction() >= 0 && c.max_bad_fraction() <= 1)
      << "max_bad_fraction " << c.max_bad_fraction() << " outside [0, 1]";
  DTRAIN_USAGE_CHECK(r.dataset != DatasetKind::kFashionMnist || r.model == ModelKind::kSmallResNet)
      << "dataset fashion-mnist (28x28) needs model small-resnet";
}

// Batches, epochs, gradient exchange and what the optimizer sees.
void check_optimization(const TrainConfig& c, const ResolvedConfig& r) {
  DTRAIN_USAGE_CHECK(c.batch_per_rank() > 0) << "batch_per_rank must be positive, got " << c.batch_per_rank();
  DTRAIN_USAGE_CHECK(c.accumulation_steps() > 0)
      << "accumulation_steps must be at least 1 (1: no gradient accumulation), got " << c.accumulation_steps();
  DTRAIN_USAGE_CHECK(c.epochs() > 0) << "epochs must be positive, got " << c.epochs();
  DTRAIN_USAGE_CHECK(c.bucket_mib() > 0) << "bucket_mib must be positive";
  DTRAIN_USAGE_CHECK(!c.allow_gpu_sharing() || r.device == DeviceChoice::kCpu || r.backend == comm::Backend::kMpiRing)
      << "allow_gpu_sharing needs backend mpi-ring, not " << c.backend()
      << ": NCCL, which the other backends use between the ranks of a host, refuses two ranks on one GPU";
  // Whether it divides the world size is checked where the world is known (batch_norm_group.h).
  DTRAIN_USAGE_CHECK(c.bn_sync_group() >= 1)
      << "bn_sync_group " << c.bn_sync_group() << " is not a group size: use 1 (off) or a divisor of the world size";
  DTRAIN_USAGE_CHECK(c.label_smoothing() >= 0 && c.label_smoothing() < 1) << "label_smoothing outside [0, 1)";
  DTRAIN_USAGE_CHECK(c.divergence_factor() == 0 || c.divergence_factor() > 1)
      << "divergence_factor " << c.divergence_factor() << " must be above 1 (the growth that counts as divergence), "
      << "or 0 for off";
  DTRAIN_USAGE_CHECK(c.divergence_factor() == 0 || c.divergence_window() >= 1)
      << "divergence_window must be at least 1 with divergence_factor " << c.divergence_factor();
  DTRAIN_USAGE_CHECK(c.max_loss() >= 0) << "max_loss " << c.max_loss() << " must not be negative (0: no bound)";
}

// The loader's threads, queue and per-file limits.
void check_loader(const TrainConfig& c) {
  DTRAIN_USAGE_CHECK(c.loader_threads() >= 0)
      << "loader_threads " << c.loader_threads() << " must be positive, or 0 for one per CPU of the rank's share";
  DTRAIN_USAGE_CHECK(c.prefetch_batches() > 0) << "prefetch_batches " << c.prefetch_batches() << " must be positive";
  DTRAIN_USAGE_CHECK(c.max_file_mib() > 0) << "max_file_mib " << c.max_file_mib() << " must be positive";
  DTRAIN_USAGE_CHECK(c.max_image_megapixels() > 0)
      << "max_image_megapixels " << c.max_image_megapixels() << " must be positive";
}

// How long a run goes, and where its checkpoints go and come from.
void check_run_length_and_checkpoints(const TrainConfig& c) {
  DTRAIN_USAGE_CHECK(c.max_steps_per_epoch() >= 0) << "max_steps_per_epoch must not be negative";
  DTRAIN_USAGE_CHECK(c.max_validation_batches() >= 0) << "max_validation_batches must not be negative";
  DTRAIN_USAGE_CHECK(c.timing_warmup_steps() >= 0) << "timing_warmup_steps must not be negative";
  DTRAIN_USAGE_CHECK(c.max_nonfinite_steps() >= 0)
      << "max_nonfinite_steps must not be negative, got " << c.max_nonfinite_steps();
  DTRAIN_USAGE_CHECK(c.checkpoint_every_steps() >= 0 && c.keep_checkpoints() > 0 && c.max_total_steps() >= 0)
      << "checkpoint_every_steps and max_total_steps must not be negative, keep_checkpoints must be positive";
  DTRAIN_USAGE_CHECK(c.checkpoint_every_steps() == 0 || !c.checkpoint_dir().empty())
      << "checkpoint_every_steps needs checkpoint_dir";
  DTRAIN_USAGE_CHECK((c.resume() != "latest" && c.resume() != "required") || !c.checkpoint_dir().empty())
      << "resume " << c.resume() << " needs checkpoint_dir";
}

// The model's shape, and the weights it starts from.
void check_model_and_init_weights(const TrainConfig& c, const ResolvedConfig& r) {
  DTRAIN_USAGE_CHECK(r.model != ModelKind::kSmallResNet || c.blocks_per_stage_size() > 0)
      << "small-resnet needs blocks_per_stage (e.g. --blocks_per_stage=1,1,1)";
  DTRAIN_USAGE_CHECK(!c.reinit_classifier() || !c.init_weights().empty())
      << "reinit_classifier re-initializes the classifier of init_weights: give --init-weights FILE.safetensors";
  DTRAIN_USAGE_CHECK(!c.has_backbone_lr_scale() || c.backbone_lr_scale() >= 0)
      << "backbone_lr_scale " << c.backbone_lr_scale() << " must not be negative";
}

}  // namespace

ResolvedConfig resolve(const TrainConfig& c) {
  ResolvedConfig r;
  r.fields = c;
  parse_choices(c, r);
  check_data(c, r);
  check_optimization(c, r);
  check_loader(c);
  check_run_length_and_checkpoints(c);
  r.stop_signals = runtime::parse_signal_list(c.stop_signals(), "stop_signals");
  r.run_dir = !c.run_dir().empty() ? c.run_dir() : c.checkpoint_dir();
  comm::validate_stall_settings({c.stall_warning_seconds(), c.stall_abort_seconds()}, "TrainConfig");
  check_model_and_init_weights(c, r);
  r.backbone_lr_scale = c.has_backbone_lr_scale() ? static_cast<float>(c.backbone_lr_scale()) : 1.0f;
  // Also checked here, so a malformed range fails with the other flag mistakes, before MPI starts.
  if (!c.timeline().empty()) parse_timeline_steps(c.timeline_steps(), runtime::flag_name("timeline_steps"));
  if (!c.profile_out().empty()) parse_timeline_steps(c.profile_steps(), runtime::flag_name("profile_steps"));
  validate_limits(c);  // absurd sizes and non-finite numbers, before anything is allocated
  return r;
}

models::ResNetConfig resnet_config(const ResolvedConfig& r, int num_classes, int in_channels) {
  const TrainConfig& c = r.fields;
  models::ResNetConfig m;
  m.depth = c.depth();
  m.blocks_per_stage.assign(c.blocks_per_stage().begin(), c.blocks_per_stage().end());
  m.bottleneck = c.bottleneck();
  m.width = c.width();
  m.small_input = r.model == ModelKind::kSmallResNet;
  m.zero_init_residual = c.zero_init_residual();
  m.batch_norm = !c.no_batch_norm();
  m.num_classes = num_classes;
  m.in_channels = in_channels;
  m.seed = c.seed();
  return m;
}

}  // namespace dtrain::train
