#pragma once
// One rank's training step on its GPU: the uint8 batch crosses
// PCIe on a copy stream, is normalized and cast on the compute stream, forward, loss, backward
// with each gradient bucket's all-reduce queued on a comm stream as soon as backward has written
// it, then the fused SGD update. run() only queues work: the host never waits for the GPU inside
// a step, so it runs ahead and the GPU never idles between steps.
//
// With accumulation_steps K a step is K calls of run(), one per micro-batch: each backward folds
// its gradients into an fp32 sum on the compute stream (gradient_accumulation.h); only the last
// one's buckets are all-reduced, and the SGD update follows it.
//
// Input: [batch, H, W, C] uint8 images (C = the model's input channels, 1 to 4) and [batch] int32
// labels in page-locked host memory. The copy is asynchronous, into one of kInputSlots device
// slots: run() and evaluate() return the slot, and the host memory must stay untouched until
// input_copied(slot) says the copy is done (the loader's pinned batches are the staging ring).
//
// With cuda_graphs (on unless DTRAIN_CUDA_GRAPHS=0) the compute stream's part of a step is
// captured after kEagerStepsBeforeCapture eager steps (cuDNN plans chosen, allocator warm) as one
// CUDA graph per input slot (the slot's address is in the graph) and replayed (step_graph.h); the
// copy, the idle clock's and the slots' events stay outside. With several ranks the graphs are cut
// where a bucket's all-reduce is queued: the all-reduces stay eager between the launches, as in
// the eager step (NCCL, or the staged cross-node ring). Device pointers handed to MPI directly,
// accumulation and synchronized BN keep the eager step and say why once in the log; traced and
// profiled steps run eager.
// Anything that moves a buffer a graph reads (evaluation, a resume, a new lr scale table) drops
// the graphs; the next step captures again. The shapes never change: run() always takes `batch`.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/gradient_sync/bucket_plan.h"
#include "comm/gradient_sync/cuda/device_gradient_synchronizer.h"
#include "comm/gradient_sync/gradient_buckets.h"
#include "comm/gradient_sync/gradient_sync.h"
#include "models/cuda/classification_metrics.h"
#include "models/cuda/gpu_context.h"
#include "models/cuda/gpu_resnet.h"
#include "models/resnet_plan.h"
#include "runtime/cuda/stream.h"
#include "runtime/memory/buffer.h"
#include "train/config/resolved_config.h"
#include "train/data/cuda/device_jpeg_stage.h"
#include "train/engine/cuda/device_step_clock.h"
#include "train/engine/cuda/gpu_step_profiler.h"
#include "train/engine/cuda/gpu_step_trace.h"
#include "train/engine/cuda/step_graph.h"
#include "train/engine/device_memory_plan.h"
#include "train/engine/gradient_accumulation.h"
#include "train/engine/sgd.h"

namespace dtrain::train::cuda {

struct GpuStepOptions {
  models::ResNetConfig model;
  models::cuda::ConvNumerics numerics = models::cuda::ConvNumerics::kBf16Nhwc;
  bool allow_tf32 = true;  // fp32 numerics only
  int batch = 0, height = 0, width = 0;
  float mean[3] = {0, 0, 0};  // per-channel normalization of the uint8 input scaled to [0, 1]
  float std[3] = {1, 1, 1};
  SgdOptions sgd;
  bool exempt_norm_and_bias_from_decay = false;
  float label_smoothing = 0.0f;
  comm::BucketSizes buckets;   // the defaults of gradient_sync.h
  int accumulation_steps = 1;  // micro-batches (of `batch` images) per optimizer step
  // kGpu: the step decodes the loader's deferred JPEGs (device_jpeg_stage.h); a UsageError on a
  // GPU without a hardware JPEG decoder or without nvJPEG.
  JpegDecoder jpeg_decoder = JpegDecoder::kCpu;
  // Off for options filled in by hand; gpu_step_options (what the trainer and the benchmark use)
  // sets it from DTRAIN_CUDA_GRAPHS, which is on unless 0 (cuda_graphs_setting.h).
  bool cuda_graphs = false;
};

// The one translation of a resolved config into the GPU step's options (dtrain-train's engine and
// dtrain-bench-train both use it): numerics, batch, optimizer, loss, buckets from the config;
// the model, the input size and the normalization from the caller; cuda_graphs from the
// environment (a UsageError for a bad DTRAIN_CUDA_GRAPHS).
GpuStepOptions gpu_step_options(const ResolvedConfig& config, const models::ResNetConfig& model, int height, int width,
                                const float mean[3], const float std[3]);

// What device_memory_plan.h needs of a step's options.
DeviceMemoryPlanOptions memory_plan_options(const GpuStepOptions& options);

struct StepResult {
  float mean_loss = 0;  // this rank's, the mean over the step's micro-batches
  int top1_hits = 0;    // over the step's micro-batches
};

class GpuTrainStep {
 public:
  // Collective over comm (null or size 1: no gradient averaging): broadcasts rank 0's parameters
  // and state. `device` is this rank's GPU.
  GpuTrainStep(const GpuStepOptions& options, comm::Communicator* comm, int device);
  ~GpuTrainStep();

  static constexpr int kInputSlots = 3;
  static constexpr int kEagerStepsBeforeCapture = 3;

  // Queues one micro-batch of a step (micro.count must be options().accumulation_steps; the default,
  // with one micro-batch, is a whole step); returns the input slot its batch is copied into. lr is
  // read on the last micro-batch only. trace: the timeline's spans of this micro-batch (H2D copy on
  // the copy stream; forward, backward and, on the last, SGD update on the compute stream and each
  // bucket's all-reduce on the comm stream), or nullptr. `deferred`: the loader batch `images` and
  // `labels` belong to, whose deferred JPEGs the step decodes into its input (decodes_jpeg()).
  int run(const uint8_t* images, const int32_t* labels, float lr, const MicroBatch& micro = {},
          GpuStepTrace* trace = nullptr, const Batch* deferred = nullptr);
  // The next step's last micro-batch records its profile marks into `profiler` (resolve() them
  // after run() returns); nullptr: none.
  void profile_next_run(GpuStepProfiler* profiler) { profiler_ = profiler; }
  // Whether run() decodes a batch's deferred JPEGs; the stage that does, with its counts.
  bool decodes_jpeg() const { return jpeg_ != nullptr; }
  const DeviceJpegStage* jpeg_stage() const { return jpeg_.get(); }
  // The GPU's times of each micro-batch of run() since the last call, oldest first
  // (device_step_clock.h): those the GPU has started, or every one with wait_all.
  std::vector<DeviceMicroBatchTime> take_micro_batch_times(bool wait_all) { return clock_.take(wait_all); }
  // Whether the copy into `slot` finished (its host memory may be reused); never blocks.
  bool input_copied(int slot);
  void wait_input_copied(int slot);

  // Evaluation: metrics of `count` <= batch images accumulate on the device (the forward pass runs
  // at the training batch size, so no new shapes; rows past `count` are not counted). evaluate()
  // queues and returns the input slot, like run(); end_evaluation() waits and reads the totals.
  void begin_evaluation();
  int evaluate(const uint8_t* images, const int32_t* labels, int count);
  models::cuda::EvalAccumulators end_evaluation();
  // Takes parameters and BN state from the host mirror (model().parameters()) and `momentum` on
  // rank 0 and gives them to every rank (after a resume). Collective. `momentum` is in the standard
  // layout, as the parameters (what checkpoints hold, whatever the numerics).
  void load_from_host(const std::vector<float>& momentum);
  // Fine-tuning: every parameter but the classifier's updates at `scale` x the step's lr from the
  // next step on; 0 freezes them (train::decay_ranges). Waits for the queued steps.
  void set_backbone_lr_scale(float scale);
  // Loss and hits of the latest optimizer step; waits for it.
  StepResult last_result();
  void synchronize();

  models::cuda::GpuResNet& model() { return *model_; }
  models::cuda::GpuContext& context() { return *context_; }
  // The momentum buffer into `out` (resized), in the standard layout. Synchronizes.
  void momentum_to_host(std::vector<float>& out);
  // The device momentum buffer itself, in the device's layout (for tests).
  const float* momentum_on_device() const { return static_cast<const float*>(momentum_.data()); }
  const GpuStepOptions& options() const { return options_; }
  int buckets_during_backward() const { return sync_ ? sync_->launched_during_backward() : 0; }
  // The synchronizer's buckets; 0 on one rank, where nothing is averaged.
  size_t gradient_buckets() const { return sync_ ? sync_->bucket_count() : 0; }
  // Steps replayed from a CUDA graph so far, and one line on the graphs (on with its counts, or
  // off and why) for logs and benchmark results.
  long graph_replays() const { return graph_replays_; }
  std::string cuda_graphs_report() const;

 private:
  void broadcast_from_rank0();
  // Queues the copy of `count` images and labels into the next input slot, after the compute
  // stream has consumed that slot's previous contents; the compute stream waits for the copy.
  int stage_input(const uint8_t* images, const int32_t* labels, int count, GpuStepTrace* trace = nullptr,
                  const Batch* deferred = nullptr);
  // The loss of `logits` against the device `labels` into micro-batch `micro_batch`'s slots, and
  // its gradient into dlogits_, on the compute stream.
  void loss_and_dlogits(const runtime::Tensor& logits, const int32_t* labels, int micro_batch);
  // uint8 NHWC pixels already on the device -> `out` in the context's type and layout.
  void normalize(const void* device_pixels, int count, runtime::Tensor& out);
  // The micro-batch's work on the compute stream once its input is there. `captured`: into a graph,
  // so the slot's consumed event is left to the caller and the lr is read from lr_device_.
  void queue_compute(int s, float lr, const MicroBatch& micro, GpuStepTrace* trace, GpuStepProfiler* profile,
                     bool captured);
  void queue_update(float lr, bool captured);
  // Whether this micro-batch replays a graph (logs once why not, where it never will).
  bool graph_this_step(bool traced_or_profiled);
  void run_graphed(int s, float lr, const MicroBatch& micro);
  // Inside a capture of an averaged step: notes the gradient range for the replay to report, and
  // cuts the graph where the eager step would queue a bucket's all-reduce (finish: before the
  // update).
  void report_in_capture(size_t begin, size_t end);
  void finish_in_capture();
  void graphs_off(const std::string& why, bool unexpected = false);
  std::string another_step_holds_graphs() const;
  void drop_graphs();
  void set_up_graphs();

  GpuStepOptions options_;
  comm::Communicator* comm_;
  std::unique_ptr<models::cuda::GpuContext> context_;
  std::unique_ptr<models::cuda::GpuResNet> model_;
  std::unique_ptr<comm::DeviceGradientSynchronizer> sync_;
  runtime::CudaStream copy_stream_;
  // Device input slots, so the copies of the next steps overlap this one.
  runtime::Buffer images_[kInputSlots], labels_[kInputSlots];
  // Made on the step's device (slot_events): the members are built before the constructor's guard.
  std::array<runtime::CudaEvent, kInputSlots> copied_, consumed_;
  int slot_ = 0;
  bool any_step_ = false;
  runtime::Tensor input_, dlogits_;
  // loss_ and hits_: one slot per micro-batch of a step.
  runtime::Buffer momentum_, decay_ranges_, loss_, hits_, eval_totals_;
  runtime::Buffer gradient_sum_;  // the micro-batches' fp32 running sum (accumulation_steps > 1)
  MicroBatch micro_;              // of the micro-batch being queued
  int decay_range_count_ = 0;
  int open_bucket_span_ = -1;              // the timeline's span of the bucket all-reduce being queued
  DeviceStepClock clock_;                  // around each micro-batch of run() on the compute stream
  GpuStepProfiler* profiler_ = nullptr;    // the next step's, until its last micro-batch takes it
  GpuStepProfiler* profiling_ = nullptr;   // the backward in progress marks its ranges here
  std::unique_ptr<DeviceJpegStage> jpeg_;  // null: the loader decodes every image
  std::unique_ptr<StepGraphs> graphs_;     // null: eager (off, or fell back; graphs_off_why_ says why)
  std::string graphs_off_why_;
  runtime::Buffer lr_device_;  // the lr the graphs' SGD update reads, written before each launch
  int eager_steps_ = 0;        // before the first capture
  long graph_replays_ = 0;
  bool told_eager_traced_ = false;
  // Averaged steps: the graphs are cut where a bucket's all-reduce is queued, which stays
  // eager between the launches. Per input slot, the gradient ranges to report after each graph;
  // during a capture, its bucket bookkeeping (a dry run of the synchronizer's) and its ranges.
  comm::BucketPlan bucket_plan_;
  std::map<int, std::vector<std::vector<std::pair<size_t, size_t>>>> reported_after_;
  std::unique_ptr<comm::GradientBuckets> capture_buckets_;
  std::vector<std::vector<std::pair<size_t, size_t>>> capture_reported_;
  bool capturing_ = false;
};

}  // namespace dtrain::train::cuda
