// dtrain-bench-train: ResNet training throughput on synthetic ImageNet-shaped data, one rank per
// GPU. For each world size asked (--world-sizes, default 1 and the whole job), the first k ranks
// train together: warm-up steps, then measured steps timed by CUDA events on the compute stream
// (the host never waits inside the loop). Prints images/sec per GPU and in total (median step,
// warm-up excluded), step time, speedup and efficiency against the 1-GPU run, and peak GPU memory;
// --metrics-file writes one object per world size. --profile-out: after the first world size's
// measured steps, --profile-steps more on it, each timed phase by phase and waited for, and rank 0
// writes their step profile (train/observe/step_profile.h) for dtrain-project.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/common/result_file.h"
#include "comm/backends/factory.h"
#include "comm/gradient_sync/gradient_sync.h"
#include "models/cuda/cudnn_conv2d.h"
#include "models/cuda/op_timer.h"
#include "runtime/base/cli.h"
#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/base/process_identity.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_allocator.h"
#include "runtime/cuda/stream.h"
#include "runtime/io/atomic_file.h"
#include "runtime/io/json.h"
#include "runtime/memory/buffer.h"
#include "runtime/mpi/main_guard.h"
#include "runtime/mpi/mpi_check.h"
#include "runtime/mpi/mpi_scope.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_bootstrap.h"
#include "runtime/rank/rank_context.h"
#include "train/engine/cuda/gpu_step_profiler.h"
#include "train/engine/cuda/gpu_train_step.h"
#include "train/engine/cuda_graphs_setting.h"
#include "train/engine/device_memory_plan.h"
#include "train/observe/step_profile.h"

namespace dtrain::bench {
namespace {

struct Options {
  int batch = 256;
  std::string precision = "bf16";
  std::string layout;  // default: nhwc for bf16, nchw for fp32
  int image_size = 224;
  int depth = 50;
  int classes = 1000;
  int warmup = 20;
  int steps = 50;
  std::string world_sizes;  // "1,2"; default: 1 and the job's size
  bool no_tf32 = false;
  std::string backend = "auto";
  std::string gradient_wire_dtype = "fp32";  // what crosses nodes (hierarchical, mpi-ring); explicit, to compare
  int bucket_mib = comm::kDefaultBucketMib;
  int tail_bucket_mib = comm::kDefaultTailBucketMib;
  int first_bucket_mib = 0;
  double lr = 0.1;
  std::string json;
  std::string profile_out;
  int profile_steps = 10;
  int op_times_steps = 0;
  bool memory_plan = false;
  train::ResolvedConfig config;  // the options above as dtrain-train's config (resolve() checks them)
};

Options parse(int argc, char** argv, bool* help) {
  Options o;
  runtime::po::options_description d("dtrain-bench-train options");
  d.add_options()("batch-per-rank", runtime::po::value(&o.batch)->default_value(o.batch), "images per GPU per step")(
      "precision", runtime::po::value(&o.precision)->default_value(o.precision), "bf16 (fp32 master weights) or fp32")(
      "layout", runtime::po::value(&o.layout), "nhwc (with bf16) or nchw (with fp32); default follows --precision")(
      "image-size", runtime::po::value(&o.image_size)->default_value(o.image_size), "square input side")(
      "depth", runtime::po::value(&o.depth)->default_value(o.depth), "ResNet depth: 18, 34, 50, 101, 152")(
      "classes", runtime::po::value(&o.classes)->default_value(o.classes), "classifier outputs")(
      "timing-warmup-steps", runtime::po::value(&o.warmup)->default_value(o.warmup),
      "steps run before measuring (excluded)")("steps", runtime::po::value(&o.steps)->default_value(o.steps),
                                               "measured steps")(
      "world-sizes", runtime::po::value(&o.world_sizes),
      "comma-separated world sizes to run, e.g. 1,2 (default: 1 and all ranks)")(
      "no-tf32", runtime::po::value(&o.no_tf32)->implicit_value(true)->default_value(false),
      "fp32: exact fp32 math, no TF32 tensor cores")("backend",
                                                     runtime::po::value(&o.backend)->default_value(o.backend),
                                                     "gradient all-reduce backend (auto, nccl, ...)")(
      "gradient-wire-dtype", runtime::po::value(&o.gradient_wire_dtype)->default_value(o.gradient_wire_dtype),
      "fp32, bf16, fp16 or auto (dtrain-train's default): what crosses nodes on hierarchical and mpi-ring")(
      "bucket-mib", runtime::po::value(&o.bucket_mib)->default_value(o.bucket_mib), "gradient bucket size in MiB")(
      "tail-bucket-mib", runtime::po::value(&o.tail_bucket_mib)->default_value(o.tail_bucket_mib),
      "the bucket backward completes last, in MiB (0: equal buckets)")(
      "first-bucket-mib", runtime::po::value(&o.first_bucket_mib)->default_value(o.first_bucket_mib),
      "the bucket backward completes first, in MiB (0: none)")(
      "base-lr", runtime::po::value(&o.lr)->default_value(o.lr),
      "the lr for a global batch of 256 (linear scaling rule)")("metrics-file", runtime::po::value(&o.json),
                                                                "also write the results to this JSON file")(
      "profile-out", runtime::po::value(&o.profile_out),
      "write the first world size's step profile (for dtrain-project) to this JSON file")(
      "profile-steps", runtime::po::value(&o.profile_steps)->default_value(o.profile_steps),
      "steps profiled after the measured ones (each waits for the GPU)")(
      "op-times-steps", runtime::po::value(&o.op_times_steps)->default_value(o.op_times_steps),
      "eager steps after the measured ones with every layer's kernels timed by kind, to see where a step's GPU "
      "time goes (0: none)")(
      "memory-plan", runtime::po::value(&o.memory_plan)->implicit_value(true)->default_value(false),
      "print the step's device memory, category by category against PyTorch's, computed from the model (no GPU), "
      "and exit");
  const runtime::ParsedCommandLine parsed = runtime::parse_command_line(argc, argv, d);
  if (parsed.help) {
    std::printf("%s", runtime::usage("dtrain-bench-train", d).c_str());
    *help = true;
    return o;
  }
  if (o.layout.empty()) o.layout = o.precision == "fp32" ? "nchw" : "nhwc";
  DTRAIN_USAGE_CHECK(o.precision == "bf16" || o.precision == "fp32")
      << "--precision " << o.precision << ": expected bf16 or fp32";
  DTRAIN_USAGE_CHECK((o.precision == "bf16" && o.layout == "nhwc") || (o.precision == "fp32" && o.layout == "nchw"))
      << "--precision " << o.precision << " --layout " << o.layout
      << ": the supported paths are bf16 nhwc (fast) and fp32 nchw (reference)";
  DTRAIN_USAGE_CHECK(o.batch > 0) << "--batch-per-rank " << o.batch << ": must be positive";
  DTRAIN_USAGE_CHECK(o.image_size >= 32) << "--image-size " << o.image_size << ": must be at least 32";
  DTRAIN_USAGE_CHECK(o.classes > 0) << "--classes " << o.classes << ": must be positive";
  DTRAIN_USAGE_CHECK(o.warmup >= 0) << "--timing-warmup-steps " << o.warmup << ": must not be negative";
  DTRAIN_USAGE_CHECK(o.steps > 0) << "--steps " << o.steps << ": must be positive";
  train::cuda_graphs_from_environment();  // a bad DTRAIN_CUDA_GRAPHS fails here, before MPI and the GPU
  DTRAIN_USAGE_CHECK(o.bucket_mib > 0) << "--bucket-mib " << o.bucket_mib << ": must be positive";
  DTRAIN_USAGE_CHECK(o.tail_bucket_mib >= 0) << "--tail-bucket-mib " << o.tail_bucket_mib << ": must not be negative";
  DTRAIN_USAGE_CHECK(o.first_bucket_mib >= 0)
      << "--first-bucket-mib " << o.first_bucket_mib << ": must not be negative";
  DTRAIN_USAGE_CHECK(o.profile_steps > 0) << "--profile-steps " << o.profile_steps << ": must be positive";
  DTRAIN_USAGE_CHECK(o.op_times_steps >= 0) << "--op-times-steps " << o.op_times_steps << ": must not be negative";
  train::TrainConfig c = train::default_train_config();
  c.set_model("resnet");
  c.set_depth(o.depth);
  c.set_precision(o.precision);
  c.set_no_tf32(o.no_tf32);
  c.set_batch_per_rank(o.batch);
  c.set_image_size(o.image_size);
  c.set_bucket_mib(o.bucket_mib);
  c.set_tail_bucket_mib(o.tail_bucket_mib);
  c.set_first_bucket_mib(o.first_bucket_mib);
  c.set_backend(o.backend);
  c.set_gradient_wire_dtype(o.gradient_wire_dtype);
  o.config = train::resolve(c);
  return o;
}

std::vector<int> world_sizes(const std::string& text, int world) {
  std::vector<int> sizes;
  if (text.empty()) {
    sizes.push_back(1);
    if (world > 1) sizes.push_back(world);
    return sizes;
  }
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    // Each size between 1 and the job's ranks.
    sizes.push_back(static_cast<int>(runtime::parse_int_in_range(item, 1, world, "--world-sizes " + text + ": size")));
  }
  DTRAIN_USAGE_CHECK(!sizes.empty()) << "--world-sizes is empty";
  return sizes;
}

struct Row {
  int world_size = 0;
  double step_ms = 0;  // median, slowest rank
  // The spread of the measured steps (10th and 90th percentile, slowest rank): tells a layout whose
  // rate moves from step to step (the host-staged rings) from one that is steadily slower.
  double step_ms_p10 = 0, step_ms_p90 = 0;
  double per_gpu = 0;  // images/sec
  double total = 0;
  double efficiency = NAN;  // against the 1-GPU row, when there is one
  double speedup = NAN;
  size_t peak_mem = 0;        // the caching allocator's peak in use, largest over the ranks
  size_t peak_reserved = 0;   // its peak held from the device (in use + cached), largest over the ranks
  size_t device_used = 0;     // cudaMemGetInfo's total - free after the run (contexts, cuDNN, NCCL too)
  size_t predicted_peak = 0;  // device_memory_plan.h's, without workspaces
  size_t largest_workspace = 0;
  float loss = 0;
  int overlapped_buckets = 0, buckets = 0;
  long graph_replays = 0;   // rank 0's steps replayed from CUDA graphs
  std::string cuda_graphs;  // rank 0's: on with its counts, or off and why
  // --op-times-steps (each rank's own; rank 0 prints): ms per step by kind of layer work, and the
  // step's GPU time.
  std::array<double, models::cuda::OpTimer::kKinds> op_ms{};
  double op_step_ms = NAN;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The nearest-rank percentile `p` (0-100) of a non-empty `v`.
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(v.size()))) - 1;
  return v[i];
}

// Two fixed batches of random pixels and labels in page-locked memory, alternated.
struct SyntheticBatches {
  runtime::Buffer images[2], labels[2];
  SyntheticBatches(const Options& o, int rank) {
    std::mt19937_64 rng(1234 + static_cast<uint64_t>(rank));
    const size_t pixels = size_t{3} * o.batch * o.image_size * o.image_size;
    for (int b = 0; b < 2; ++b) {
      images[b] = runtime::Buffer(runtime::MemoryKind::kPinnedHost, pixels);
      labels[b] = runtime::Buffer(runtime::MemoryKind::kPinnedHost, sizeof(int32_t) * o.batch);
      auto* p = static_cast<uint8_t*>(images[b].data());
      for (size_t i = 0; i < pixels; ++i) p[i] = static_cast<uint8_t>(rng() >> 56);
      auto* l = static_cast<int32_t*>(labels[b].data());
      for (int i = 0; i < o.batch; ++i) l[i] = static_cast<int32_t>(rng() % static_cast<uint64_t>(o.classes));
    }
  }
};

// Step `i` on the synthetic batches, profiled (so eager: a replayed graph records no marks).
train::StepPhases profiled_step(train::cuda::GpuTrainStep& step, train::cuda::GpuStepProfiler& profiler,
                                const SyntheticBatches& data, int i, float lr) {
  train::StepPhases phases;
  step.profile_next_run(&profiler);
  step.run(static_cast<const uint8_t*>(data.images[i % 2].data()),
           static_cast<const int32_t*>(data.labels[i % 2].data()), lr);
  profiler.resolve(&phases);
  return phases;
}

// --profile-steps more steps of `step`, each profiled, after the measured ones; rank 0 writes
// the file. Every rank runs them (the world's all-reduces need every rank).
void profile_steps(const Options& o, int k, int rank, const std::string& gpu, double step_ms,
                   train::cuda::GpuTrainStep& step, const SyntheticBatches& data, float lr) {
  train::cuda::GpuStepProfiler profiler;
  train::StepProfile profile;
  for (int i = 0; i < o.profile_steps; ++i) profile.add(profiled_step(step, profiler, data, i, lr));
  if (rank != 0) return;
  train::ProfileSource source;
  source.model = "resnet" + std::to_string(o.depth);
  source.precision = o.precision;
  source.device = gpu;
  source.batch_per_gpu = o.batch;
  source.world_size = k;
  source.bucket_bytes = static_cast<int64_t>(o.bucket_mib) << 20;  // the body's
  source.tail_bucket_bytes = static_cast<int64_t>(o.tail_bucket_mib) << 20;
  source.first_bucket_bytes = static_cast<int64_t>(o.first_bucket_mib) << 20;
  source.step_ms = step_ms;
  profile.write(o.profile_out, source, "--profile-out file");
}

// --op-times-steps more steps, profiled (eager), with the layers timing their kernels
// by kind (models/cuda/op_timer.h): the means per step into `row`. Every rank runs them (the
// world's all-reduces need every rank).
void time_ops(const Options& o, train::cuda::GpuTrainStep& step, const SyntheticBatches& data, float lr, Row* row) {
  models::cuda::OpTimer timer(step.context().stream());
  struct Installed {
    models::cuda::GpuContext& context;
    ~Installed() { context.set_op_timer(nullptr); }
  } installed{step.context()};
  step.context().set_op_timer(&timer);
  train::cuda::GpuStepProfiler profiler;
  double step_ms = 0;
  for (int i = 0; i < o.op_times_steps; ++i) {
    const train::StepPhases phases = profiled_step(step, profiler, data, i, lr);
    timer.collect();
    step_ms += (phases.forward + phases.backward + phases.optimizer) * 1e3;
  }
  for (int k = 0; k < models::cuda::OpTimer::kKinds; ++k) row->op_ms[k] = timer.total_ms()[k] / o.op_times_steps;
  row->op_step_ms = step_ms / o.op_times_steps;
}

// The op times as comment lines: each kind of layer work, then the rest of the step.
void print_op_times(int k, int steps, const Row& r) {
  using models::cuda::OpTimer;
  std::printf("# %d GPU(s): GPU time per step by kind of layer work, %d eager steps: %.2f ms in all\n", k, steps,
              r.op_step_ms);
  double timed = 0;
  for (int kind = 0; kind < OpTimer::kKinds; ++kind) {
    timed += r.op_ms[kind];
    std::printf("#   %-30s %8.2f ms %6.1f%%\n", OpTimer::name(static_cast<OpTimer::Kind>(kind)), r.op_ms[kind],
                100 * r.op_ms[kind] / r.op_step_ms);
  }
  std::printf("#   %-30s %8.2f ms %6.1f%%\n", "the rest (input, loss, update)", r.op_step_ms - timed,
              100 * (r.op_step_ms - timed) / r.op_step_ms);
}

std::string op_times_json(const Row& r) {
  using models::cuda::OpTimer;
  runtime::JsonObject times;
  for (int kind = 0; kind < OpTimer::kKinds; ++kind) {
    times.number(OpTimer::name(static_cast<OpTimer::Kind>(kind)), r.op_ms[kind], "%.4f");
  }
  return times.str();
}

models::ResNetConfig model_of(const Options& o) {
  models::ResNetConfig model;
  model.depth = o.depth;
  model.num_classes = o.classes;
  return model;
}

// The step's device memory as device_memory_plan.h computes it.
train::DeviceMemoryPlan plan_of(const Options& o) {
  const float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
  const train::cuda::GpuStepOptions step =
      train::cuda::gpu_step_options(o.config, model_of(o), o.image_size, o.image_size, mean, std);
  return train::device_memory_plan(models::resnet_plan(step.model), train::cuda::memory_plan_options(step));
}

Row run_world(const Options& o, int k, const runtime::RankContext& world_ctx, int device, const SyntheticBatches& data,
              bool profiled) {
  const int rank = world_ctx.topology().world_rank;
  const bool member = rank < k;
  MPI_Comm sub = MPI_COMM_NULL;
  DTRAIN_MPI_CHECK(MPI_Comm_split(world_ctx.world(), member ? 0 : MPI_UNDEFINED, rank, &sub));
  Row row;
  row.world_size = k;
  if (member) {
    const runtime::RankContext ctx = runtime::RankContext::from_environment(sub);
    std::unique_ptr<comm::Communicator> comm;
    if (k > 1) {
      comm = comm::make_communicator(o.config.backend, ctx, true, o.config.gradient_wire_dtype);
    }
    const float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
    const train::cuda::GpuStepOptions step_options =
        train::cuda::gpu_step_options(o.config, model_of(o), o.image_size, o.image_size, mean, std);
    runtime::device_caching_allocator(device).reset_peak();
    train::cuda::GpuTrainStep step(step_options, comm.get(), device);
    std::vector<runtime::CudaEvent> marks;
    for (int i = 0; i <= o.warmup + o.steps; ++i) marks.emplace_back(true);
    const cudaStream_t stream = step.context().stream();
    marks[0].record(stream);
    const double lr = o.lr * o.batch * k / 256.0;  // the linear scaling rule, as dtrain-train
    for (int i = 0; i < o.warmup + o.steps; ++i) {
      step.run(static_cast<const uint8_t*>(data.images[i % 2].data()),
               static_cast<const int32_t*>(data.labels[i % 2].data()), static_cast<float>(lr));
      marks[i + 1].record(stream);
    }
    step.synchronize();
    std::vector<double> times;
    for (int i = o.warmup; i < o.warmup + o.steps; ++i) times.push_back(marks[i + 1].elapsed_ms_since(marks[i]));
    double spread[3] = {median(times), percentile(times, 10), percentile(times, 90)};
    DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, spread, 3, MPI_DOUBLE, MPI_MAX, sub));
    const double step_ms = spread[0];
    row.step_ms_p10 = spread[1];
    row.step_ms_p90 = spread[2];
    if (profiled) {
      profile_steps(o, k, rank, runtime::visible_gpus().at(static_cast<size_t>(device)).name, step_ms, step, data,
                    static_cast<float>(lr));
    }
    if (o.op_times_steps > 0) time_ops(o, step, data, static_cast<float>(lr), &row);
    const runtime::AllocatorStats memory = runtime::device_caching_allocator(device).stats();
    size_t free_bytes = 0, total_bytes = 0;
    DTRAIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    unsigned long long peaks[3] = {memory.peak_bytes_in_use, memory.peak_bytes_reserved, total_bytes - free_bytes};
    DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, peaks, 3, MPI_UNSIGNED_LONG_LONG, MPI_MAX, sub));
    row.step_ms = step_ms;
    row.per_gpu = o.batch / (step_ms / 1000.0);
    row.total = row.per_gpu * k;
    row.peak_mem = peaks[0];
    row.peak_reserved = peaks[1];
    row.device_used = peaks[2];
    row.predicted_peak = plan_of(o).predicted_peak;
    row.largest_workspace = models::cuda::CudnnConv2d::largest_workspace_bytes();
    row.loss = step.last_result().mean_loss;
    row.overlapped_buckets = step.buckets_during_backward();
    row.buckets = static_cast<int>(step.gradient_buckets());
    row.graph_replays = step.graph_replays();
    row.cuda_graphs = step.cuda_graphs_report();
    DTRAIN_CHECK(std::isfinite(row.loss)) << "rank " << rank << ": the loss is " << row.loss << " after "
                                          << o.warmup + o.steps << " steps at world size " << k;
    MPI_Comm_free(&sub);
  }
  DTRAIN_MPI_CHECK(MPI_Barrier(world_ctx.world()));
  return row;
}

// A table cell: `v` with `format`, or "-" where there is no value (no 1-GPU row to compare with).
std::string table_cell(double v, const char* format) {
  if (!std::isfinite(v)) return "-";
  char text[64];
  std::snprintf(text, sizeof(text), format, v);
  return text;
}

void write_json(const std::string& path, const Options& o, const std::string& gpu, const std::string& command,
                const std::vector<Row>& rows) {
  std::vector<std::string> objects;
  for (const Row& r : rows) {
    objects.push_back(runtime::JsonObject()
                          .text("model", "resnet" + std::to_string(o.depth))
                          .text("precision", o.precision)
                          .text("layout", o.layout)
                          .integer("batch_per_gpu", o.batch)
                          .integer("world_size", r.world_size)
                          .text("gpu_name", gpu)
                          .number("img_per_sec_total", r.total, "%.1f")
                          .number("img_per_sec_per_gpu", r.per_gpu, "%.1f")
                          .number("step_ms_median", r.step_ms, "%.3f")
                          .number("step_ms_p10", r.step_ms_p10, "%.3f")
                          .number("step_ms_p90", r.step_ms_p90, "%.3f")
                          .number("efficiency", r.efficiency, "%.4f")
                          .integer("peak_mem_bytes", static_cast<int64_t>(r.peak_mem))
                          .integer("peak_reserved_bytes", static_cast<int64_t>(r.peak_reserved))
                          .integer("device_used_bytes", static_cast<int64_t>(r.device_used))
                          .integer("predicted_peak_bytes", static_cast<int64_t>(r.predicted_peak))
                          .integer("largest_workspace_bytes", static_cast<int64_t>(r.largest_workspace))
                          .integer("image_size", o.image_size)
                          .integer("warmup_steps", o.warmup)
                          .integer("measured_steps", o.steps)
                          .text("backend", o.backend)
                          .text("gradient_wire_dtype", o.gradient_wire_dtype)
                          .integer("bucket_mib", o.bucket_mib)
                          .integer("tail_bucket_mib", o.tail_bucket_mib)
                          .integer("first_bucket_mib", o.first_bucket_mib)
                          .integer("buckets", r.buckets)
                          .integer("buckets_during_backward", r.overlapped_buckets)
                          .boolean("tf32", o.precision == "fp32" && !o.no_tf32)
                          .boolean("cuda_graphs", r.graph_replays > 0)
                          .text("cuda_graphs_report", r.cuda_graphs)
                          .number("op_times_step_ms", r.op_step_ms, "%.4f")
                          .raw("op_times_ms", o.op_times_steps > 0 ? op_times_json(r) : "null")
                          .text("host", runtime::process_identity().host)
                          .text("date", utc_date())
                          .text("command", command)
                          .str());
  }
  runtime::write_file_atomically(path, runtime::json_array(objects, "  ") + "\n", "--json file");
}

int bench_main(int argc, char** argv) {
  const std::string command = command_line(argc, argv);
  Options o;
  runtime::BootstrapOptions options;
  const auto read = [&] {
    bool help = false;
    o = parse(argc, argv, &help);
    return !help;
  };
  if (!runtime::read_before_mpi(read, &options)) return 0;
  if (o.memory_plan) {
    std::printf("%s", train::memory_plan_table(plan_of(o)).c_str());
    return 0;
  }
  const runtime::RankBootstrap rank(&argc, &argv, options);
  if (rank.exit_agreed()) return 0;
  const runtime::RankContext& ctx = rank.ctx();
  const runtime::GpuBinding& binding = rank.gpu();
  DTRAIN_USAGE_CHECK(!binding.cpu_mode && !binding.device.simulated)
      << "dtrain-bench-train measures the GPU path and no GPU is visible on host " << runtime::process_identity().host;
  const runtime::Topology& t = ctx.topology();
  const bool root = t.world_rank == 0;
  const std::vector<int> sizes = world_sizes(o.world_sizes, t.world_size);
  if (root) {
    std::printf(
        "# dtrain-bench-train: ResNet-%d, %s %s, batch %d per GPU, %dx%d, %d warm-up + %d measured steps, "
        "%s\n# gradient buckets: body %d MiB, tail %d MiB, first %d MiB (overlap: buckets launched during "
        "backward / buckets)\n# %s\n#\n",
        o.depth, o.precision.c_str(), o.layout.c_str(), o.batch, o.image_size, o.image_size, o.warmup, o.steps,
        binding.device.name.c_str(), o.bucket_mib, o.tail_bucket_mib, o.first_bucket_mib, command.c_str());
    std::printf("# %5s %12s %12s %10s %8s %10s %12s %10s %9s\n", "GPUs", "img/s/GPU", "img/s total", "step(ms)",
                "speedup", "efficiency", "peak mem(GB)", "loss", "overlap");
    std::fflush(stdout);
  }
  const SyntheticBatches data(o, t.world_rank);
  std::vector<Row> rows;
  double single = NAN;
  for (int k : sizes) {
    Row r = run_world(o, k, ctx, binding.device.index, data, !o.profile_out.empty() && rows.empty());
    if (k == 1) single = r.per_gpu;
    r.speedup = r.total / single;
    r.efficiency = r.per_gpu / single;
    rows.push_back(r);
    if (root) {
      // Before the row: scripts take a run's row as the output's last line.
      if (o.op_times_steps > 0) print_op_times(k, o.op_times_steps, r);
      std::printf(
          "# %d GPU(s): device memory peak %.2f GB in use (%.2f GB predicted without workspaces; largest cuDNN "
          "workspace %.3f GB), %.2f GB reserved; cudaMemGetInfo used %.2f GB\n",
          k, r.peak_mem / 1e9, r.predicted_peak / 1e9, r.largest_workspace / 1e9, r.peak_reserved / 1e9,
          r.device_used / 1e9);
      std::printf("  %5d %12.1f %12.1f %10.2f %8s %10s %12.2f %10.4f %9s\n", k, r.per_gpu, r.total, r.step_ms,
                  table_cell(r.speedup, "%.3f").c_str(), table_cell(r.efficiency * 100, "%.1f%%").c_str(),
                  r.peak_mem / 1e9, r.loss,
                  k > 1 ? (std::to_string(r.overlapped_buckets) + "/" + std::to_string(r.buckets)).c_str() : "-");
      std::printf("# %d GPU(s): step %.2f / %.2f / %.2f ms (10th percentile / median / 90th, slowest rank)\n", k,
                  r.step_ms_p10, r.step_ms, r.step_ms_p90);
      std::printf("# %d GPU(s): CUDA graphs %s\n", k, r.cuda_graphs.c_str());
      std::fflush(stdout);
    }
  }
  if (root && !o.json.empty()) write_json(o.json, o, binding.device.name, command, rows);
  if (root && !o.profile_out.empty()) std::printf("# step profile of %d GPU(s): %s\n", sizes[0], o.profile_out.c_str());
  return 0;
}

}  // namespace
}  // namespace dtrain::bench

int main(int argc, char** argv) {
  return dtrain::runtime::run_main(argc, argv, dtrain::bench::bench_main);
}
