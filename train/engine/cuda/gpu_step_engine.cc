// The GPU engine: GpuTrainStep on the rank's GPU, with NCCL (or the configured backend) averaging
// the gradients on the device. Losses are read back only when the Trainer asks (each logging
// interval and the epoch's end), so steps queue without the host waiting.
#include <deque>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "comm/backends/factory.h"
#include "comm/diagnostics/stall_inspector.h"
#include "comm/gradient_sync/gradient_buckets.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/cuda/device_allocator.h"
#include "runtime/cuda/stream.h"
#include "runtime/rank/gpu_binding.h"
#include "train/engine/batch_norm_group.h"
#include "train/engine/cuda/gpu_train_step.h"
#include "train/engine/device_memory_plan.h"
#include "train/engine/step_engine.h"

namespace dtrain::train {
namespace {

class GpuStepEngine final : public StepEngine {
 public:
  GpuStepEngine(const EngineSetup& setup, const runtime::RankContext& ctx, int gpu) : gpu_(gpu) {
    // Whatever the communicator makes for device buffers, it makes on this rank's GPU, also where
    // the caller has not made it current (tests pass the device without binding it).
    const runtime::DeviceGuard on(gpu);
    const ResolvedConfig& config = setup.config;
    const cuda::GpuStepOptions o =
        cuda::gpu_step_options(config, setup.model, setup.image.height, setup.image.width, setup.mean, setup.std);
    // On GPUs the wire format is what crosses nodes (NCCL inside a node stays fp32); the factory
    // decides auto, refuses a narrow wire on a backend that cannot carry it, and logs why.
    comm::set_stall_settings({config.fields.stall_warning_seconds(), config.fields.stall_abort_seconds()});
    comm_ = comm::make_communicator(config.backend, ctx, true, config.gradient_wire_dtype);
    const comm::Backend backend = comm::resolve_backend(config.backend, ctx.topology(), true);
    const runtime::DType wire = comm::choose_wire(config.gradient_wire_dtype, backend, ctx.topology(), true).dtype;
    const bool narrow_across_nodes = wire != runtime::DType::kF32 && ctx.topology().node_count > 1;
    step_ = std::make_unique<cuda::GpuTrainStep>(o, comm_.get(), gpu);
    // Synchronized BN: the BN layers exchange their statistics over this rank's group, through the
    // host (batch_norm.h), so such a step waits for the GPU in every BN layer.
    bn_group_ = make_batch_norm_group(ctx, config.fields.bn_sync_group());
    step_->context().set_batch_stats_reducer(bn_group_.get());
    momentum_.assign(static_cast<size_t>(step_->model().parameters().flat_size()), 0.0f);
    std::ostringstream text;
    text << "GPU " << gpu << " (" << runtime::visible_gpus().at(static_cast<size_t>(gpu)).name << "), "
         << (config.precision == Precision::kFp32 ? (o.allow_tf32 ? "fp32 NCHW, TF32 on" : "fp32 NCHW, TF32 off")
                                                  : "bf16 NHWC")
         << ", gradients over " << comm_->name()
         << (narrow_across_nodes ? std::string(" (") + runtime::dtype_name(wire) + " across nodes)" : std::string())
         << (bn_group_ ? ", BN synchronized over groups of " + std::to_string(bn_group_->group_size()) + " ranks"
                       : std::string())
         << (step_->decodes_jpeg() ? ", training JPEGs decoded on " + step_->jpeg_stage()->describe() : std::string())
         << ", CUDA graphs " << step_->cuda_graphs_report();
    description_ = text.str();
    DTRAIN_LOG0(kInfo) << memory_plan_line(device_memory_plan(models::resnet_plan(o.model), memory_plan_options(o)));
  }

  std::string describe() const override { return description_; }

  void train_step(const Batch& b, float lr, const MicroBatch& micro) override {
    DTRAIN_CHECK(b.size == step_->options().batch)
        << "GPU step of batch " << step_->options().batch << " got " << b.size << " images";
    make_room();
    TimelineRecorder* recorder = std::exchange(trace_recorder_, nullptr);
    if (recorder != nullptr) {
      if (!trace_) trace_ = std::make_unique<cuda::GpuStepTrace>(gpu_);
      trace_->begin_step(recorder, trace_step_, micro.count > 1 ? micro.index : -1);
    }
    StepPhases* profile = micro.last() ? std::exchange(profile_, nullptr) : nullptr;
    if (profile) step_->profile_next_run(&profiler_);
    held_.push_back({&b, step_->run(static_cast<const uint8_t*>(b.pixels.data()), b.labels.data(), lr, micro,
                                    recorder ? trace_.get() : nullptr, &b)});
    if (profile) profiler_.resolve(profile);  // waits for this step
  }

  void profile_next_step(StepPhases* out) override { profile_ = out; }

  void trace_next_step(TimelineRecorder* recorder, long step) override {
    trace_recorder_ = recorder;
    trace_step_ = step;
  }
  void flush_timeline() override {
    if (trace_) trace_->resolve(step_->context().stream());
  }

  std::vector<const Batch*> finished_batches(bool wait_all) override {
    std::vector<const Batch*> done = std::exchange(done_early_, {});
    while (!held_.empty() && (wait_all || step_->input_copied(held_.front().slot))) {
      if (wait_all) step_->wait_input_copied(held_.front().slot);
      done.push_back(held_.front().batch);
      held_.pop_front();
    }
    return done;
  }
  int max_batches_held() const override { return cuda::GpuTrainStep::kInputSlots; }

  double last_loss() override { return step_->last_result().mean_loss; }
  bool loss_is_free() const override { return false; }

  void begin_evaluation() override { step_->begin_evaluation(); }
  void evaluate(const Batch& b) override {
    make_room();
    held_.push_back({&b, step_->evaluate(static_cast<const uint8_t*>(b.pixels.data()), b.labels.data(), b.size)});
  }
  EvalTotals end_evaluation() override {
    const models::cuda::EvalAccumulators t = step_->end_evaluation();
    return EvalTotals{t.loss_sum, static_cast<long>(t.top1), static_cast<long>(t.top5), static_cast<long>(t.images)};
  }

  models::ParameterSet& parameters() override { return step_->model().parameters(); }
  std::vector<float>& momentum() override { return momentum_; }
  void sync_to_host() override {
    step_->model().sync_to_host();
    step_->momentum_to_host(momentum_);
  }
  void load_from_host() override { step_->load_from_host(momentum_); }
  size_t gradient_buckets() const override { return step_->gradient_buckets(); }
  void set_backbone_lr_scale(float scale) override { step_->set_backbone_lr_scale(scale); }
  bool waits_on_device() const override { return true; }
  bool decodes_jpeg() const override { return step_->decodes_jpeg(); }
  std::string jpeg_report() const override {
    if (!step_->decodes_jpeg()) return {};
    const cuda::JpegStageCounts c = step_->jpeg_stage()->counts();
    std::ostringstream text;
    text << "training JPEGs so far: " << c.on_device << " decoded on the GPU, " << c.on_host
         << " left to it but decoded on the host";
    if (c.failed_device_batches > 0) text << " (" << c.failed_device_batches << " batches the decoder refused)";
    return text.str();
  }
  std::vector<DeviceMicroBatchTime> take_device_times(bool wait_all) override {
    return step_->take_micro_batch_times(wait_all);
  }
  DeviceMemory device_memory() const override {
    const runtime::AllocatorStats s = runtime::device_caching_allocator(gpu_).stats();
    return {static_cast<double>(s.peak_bytes_in_use), static_cast<double>(s.peak_bytes_reserved)};
  }

 private:
  struct Held {
    const Batch* batch;
    int slot;  // the device input slot its copy goes to
  };

  // A batch is held until its copy to the device is done. With every input slot in use the next
  // copy could not start anyway, so the host waits for the oldest copy: that is the GPU being
  // behind (backpressure), never the host waiting inside a step it could have queued.
  void make_room() {
    if (static_cast<int>(held_.size()) < max_batches_held()) return;
    step_->wait_input_copied(held_.front().slot);
    // The Trainer picks the batch up from finished_batches().
    done_early_.push_back(held_.front().batch);
    held_.pop_front();
  }

  int gpu_;
  // Made for the timeline's first step. Before comm_ and step_, so it outlives them: the
  // communicator's worker may still report phases of queued all-reduces to it until they go.
  std::unique_ptr<cuda::GpuStepTrace> trace_;
  std::unique_ptr<comm::Communicator> comm_;
  std::unique_ptr<models::BatchStatsReducer> bn_group_;  // before step_, whose layers point to it; null: group 1
  std::unique_ptr<cuda::GpuTrainStep> step_;
  std::vector<float> momentum_;
  std::string description_;
  std::deque<Held> held_;                       // oldest first
  std::vector<const Batch*> done_early_;        // copied, taken off held_ by make_room()
  TimelineRecorder* trace_recorder_ = nullptr;  // the next step's, while the timeline records it
  long trace_step_ = 0;
  StepPhases* profile_ = nullptr;  // the next step's phases, while --profile-steps covers it
  cuda::GpuStepProfiler profiler_;
};

}  // namespace

std::unique_ptr<StepEngine> make_gpu_step_engine(const EngineSetup& setup, const runtime::RankContext& ctx, int gpu) {
  return std::make_unique<GpuStepEngine>(setup, ctx, gpu);
}

}  // namespace dtrain::train
