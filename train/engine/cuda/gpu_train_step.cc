#include "train/engine/cuda/gpu_train_step.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "models/cuda/softmax_cross_entropy.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_check.h"
#include "train/engine/cuda/accumulate_gradients.h"
#include "train/engine/cuda/normalize_images.h"
#include "train/engine/cuda/sgd_update.h"
#include "train/engine/cuda_graphs_setting.h"
#include "train/engine/gradient_bucket_plan.h"

namespace dtrain::train::cuda {
namespace {

// Events of the input slots on `device`, whatever the current device: recording an event made on
// another device on the step's streams fails with an invalid resource handle.
std::array<runtime::CudaEvent, GpuTrainStep::kInputSlots> slot_events(int device) {
  runtime::DeviceGuard on(device);
  std::array<runtime::CudaEvent, GpuTrainStep::kInputSlots> events;
  return events;
}

}  // namespace

GpuStepOptions gpu_step_options(const ResolvedConfig& config, const models::ResNetConfig& model, int height, int width,
                                const float mean[3], const float std[3]) {
  const TrainConfig& c = config.fields;
  GpuStepOptions o;
  o.model = model;
  o.numerics = config.precision == Precision::kFp32 ? models::cuda::ConvNumerics::kFp32Nchw
                                                    : models::cuda::ConvNumerics::kBf16Nhwc;
  o.allow_tf32 = !c.no_tf32();
  o.batch = c.batch_per_rank();
  o.height = height;
  o.width = width;
  for (int i = 0; i < 3; ++i) o.mean[i] = mean[i], o.std[i] = std[i];
  o.sgd = SgdOptions{c.momentum(), c.weight_decay(), c.nesterov()};
  o.exempt_norm_and_bias_from_decay = c.exclude_norm_and_bias_from_decay();
  o.label_smoothing = static_cast<float>(c.label_smoothing());
  o.buckets = gradient_bucket_sizes(c);
  o.accumulation_steps = c.accumulation_steps();
  o.jpeg_decoder = config.jpeg_decoder;  // resolve() allows gpu with image folders only
  o.cuda_graphs = cuda_graphs_from_environment();
  return o;
}

DeviceMemoryPlanOptions memory_plan_options(const GpuStepOptions& options) {
  DeviceMemoryPlanOptions m;
  m.batch = options.batch;
  m.height = options.height;
  m.width = options.width;
  m.bf16 = options.numerics == models::cuda::ConvNumerics::kBf16Nhwc;
  m.input_slots = GpuTrainStep::kInputSlots;
  m.accumulation_steps = options.accumulation_steps;
  return m;
}

GpuTrainStep::GpuTrainStep(const GpuStepOptions& options, comm::Communicator* comm, int device)
    : options_(options),
      comm_(comm),
      copy_stream_(device),
      copied_(slot_events(device)),
      consumed_(slot_events(device)),
      clock_(device) {
  DTRAIN_USAGE_CHECK(options.batch > 0 && options.height > 0 && options.width > 0)
      << "GPU step needs a positive batch and image size, got batch " << options.batch << " and " << options.height
      << "x" << options.width;
  DTRAIN_USAGE_CHECK(options.model.in_channels >= 1 && options.model.in_channels <= 4)
      << "the GPU input path takes 1 to 4 channels, the model has " << options.model.in_channels;
  runtime::DeviceGuard on(device);
  if (options.jpeg_decoder == JpegDecoder::kGpu) {
    std::string why_not;
    jpeg_ = DeviceJpegStage::open(kInputSlots, &why_not);
    DTRAIN_USAGE_CHECK(jpeg_) << "jpeg_decoder gpu on GPU " << device << ": " << why_not;
  }
  context_ = std::make_unique<models::cuda::GpuContext>(device, options.numerics, options.allow_tf32);
  model_ = std::make_unique<models::cuda::GpuResNet>(options.model, *context_);
  models::cuda::DeviceParameters& params = model_->device_parameters();
  const cudaStream_t stream = context_->stream();
  const size_t count = static_cast<size_t>(params.count());

  DTRAIN_USAGE_CHECK(options.accumulation_steps >= 1)
      << "accumulation_steps must be at least 1, got " << options.accumulation_steps;
  if (comm_ != nullptr && comm_->size() > 1) {
    sync_ = std::make_unique<comm::DeviceGradientSynchronizer>(
        *comm_, params.grads_f32(), gradient_bucket_plan(params.layout(), options.buckets), stream, device);
  }
  if (options.accumulation_steps > 1) {
    gradient_sum_ = runtime::Buffer(runtime::MemoryKind::kDevice, count * sizeof(float), stream);
  }
  // The fold is queued right after the kernel that wrote the range, so the all-reduce the last
  // micro-batch reports next sees the mean; earlier micro-batches report to no collective. A
  // profiled step marks the moment the range is ready for its all-reduce.
  params.set_gradient_listener([this](int64_t begin, int64_t end) {
    if (sync_ || options_.accumulation_steps > 1) {
      const size_t b = static_cast<size_t>(begin), n = static_cast<size_t>(end - begin);
      float* grads = model_->device_parameters().grads_f32() + b;
      accumulate_gradients(context_->stream(), micro_, grads, static_cast<float*>(gradient_sum_.data()) + b, n);
      if (sync_ && micro_.last()) {
        if (capturing_) {
          report_in_capture(b, b + n);
        } else {
          sync_->mark_ready(b, b + n);
        }
      }
    }
    if (profiling_) profiling_->gradient_ready(begin, end - begin, context_->stream());
  });

  momentum_ = runtime::Buffer(runtime::MemoryKind::kDevice, count * sizeof(float), stream);
  DTRAIN_CUDA_CHECK(cudaMemsetAsync(momentum_.data(), 0, momentum_.bytes(), stream));
  set_backbone_lr_scale(1.0f);

  const int channels = options.model.in_channels;
  const size_t image_bytes = size_t(channels) * options.batch * options.height * options.width;
  for (int s = 0; s < kInputSlots; ++s) {
    images_[s] = runtime::Buffer(runtime::MemoryKind::kDevice, image_bytes, copy_stream_.get());
    labels_[s] = runtime::Buffer(runtime::MemoryKind::kDevice, sizeof(int32_t) * options.batch, copy_stream_.get());
  }
  input_ = runtime::Tensor(context_->activation_dtype(), {options.batch, channels, options.height, options.width},
                           runtime::MemoryKind::kDevice);
  const size_t micro_batches = static_cast<size_t>(options.accumulation_steps);
  loss_ = runtime::Buffer(runtime::MemoryKind::kDevice, micro_batches * sizeof(float), stream);
  hits_ = runtime::Buffer(runtime::MemoryKind::kDevice, micro_batches * sizeof(int32_t), stream);
  eval_totals_ = runtime::Buffer(runtime::MemoryKind::kDevice, sizeof(models::cuda::EvalAccumulators), stream);
  set_up_graphs();
  broadcast_from_rank0();
}

void GpuTrainStep::broadcast_from_rank0() {
  models::cuda::DeviceParameters& params = model_->device_parameters();
  const cudaStream_t stream = context_->stream();
  std::vector<comm::Work> sent;
  if (comm_ != nullptr && comm_->size() > 1) {
    // Every rank initialized from the same seed; rank 0's values win all the same (DDP's rule).
    const auto on_stream = comm::Location::gpu(stream);
    const size_t count = static_cast<size_t>(params.count());
    sent.push_back(comm_->broadcast(params.params_f32(), count, runtime::DType::kF32, 0, on_stream));
    sent.push_back(comm_->broadcast(params.state_f32(), static_cast<size_t>(params.state_count()), runtime::DType::kF32,
                                    0, on_stream));
    if (context_->bf16())
      sent.push_back(comm_->broadcast(params.params_bf16(), count, runtime::DType::kBF16, 0, on_stream));
    sent.push_back(comm_->broadcast(momentum_.data(), count, runtime::DType::kF32, 0, on_stream));
  }
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (const comm::Work& w : sent) w.wait();  // a failed broadcast would leave replicas apart
}

void GpuTrainStep::load_from_host(const std::vector<float>& momentum) {
  runtime::DeviceGuard on(context_->device());
  synchronize();
  drop_graphs();  // the uploads keep the buffers; dropped all the same, so nothing replays across a resume
  DTRAIN_CHECK(momentum.size() * sizeof(float) == momentum_.bytes())
      << "momentum of " << momentum.size() << " values for " << momentum_.bytes() / sizeof(float) << " parameters";
  model_->device_parameters().upload();
  // Checkpoints hold momentum in the standard layout, as the parameters: otherwise a bf16 NHWC
  // checkpoint resumed in fp32 or on the CPU would scramble the momentum of every k x k filter.
  model_->device_parameters().upload_flat(momentum.data(), static_cast<float*>(momentum_.data()));
  broadcast_from_rank0();
}

void GpuTrainStep::set_backbone_lr_scale(float scale) {
  runtime::DeviceGuard on(context_->device());
  const cudaStream_t stream = context_->stream();
  std::vector<DecayRangeEnd> ends;
  for (const DecayRange& r : decay_ranges(model_->parameters(), static_cast<float>(options_.sgd.weight_decay),
                                          options_.exempt_norm_and_bias_from_decay, scale)) {
    ends.push_back(DecayRangeEnd{r.end, r.weight_decay, r.lr_scale});
  }
  // The steps already queued read the old table: it is replaced only once they are done, and the
  // graphs, which hold its address, go with it.
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  drop_graphs();
  decay_range_count_ = static_cast<int>(ends.size());
  decay_ranges_ = runtime::Buffer(runtime::MemoryKind::kDevice, ends.size() * sizeof(DecayRangeEnd), stream);
  DTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(decay_ranges_.data(), ends.data(), decay_ranges_.bytes(), cudaMemcpyHostToDevice, stream));
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream));  // `ends` goes out of scope
}

void GpuTrainStep::begin_evaluation() {
  runtime::DeviceGuard on(context_->device());
  // The eval-mode forward may reallocate what a graph of the training step holds: the next
  // training step captures again rather than replay a stale graph.
  drop_graphs();
  DTRAIN_CUDA_CHECK(cudaMemsetAsync(eval_totals_.data(), 0, eval_totals_.bytes(), context_->stream()));
}

int GpuTrainStep::evaluate(const uint8_t* images, const int32_t* labels, int count) {
  runtime::DeviceGuard on(context_->device());
  DTRAIN_CHECK(count > 0 && count <= options_.batch)
      << "evaluation batch of " << count << " images; 1 to " << options_.batch << " expected";
  const int s = stage_input(images, labels, count);
  normalize(images_[s].data(), options_.batch, input_);
  const runtime::Tensor& logits = model_->forward(input_, false);
  const int classes = static_cast<int>(logits.shape()[1]);
  const auto* labels_device = static_cast<const int32_t*>(labels_[s].data());
  auto* totals = static_cast<models::cuda::EvalAccumulators*>(eval_totals_.data());
  if (context_->bf16()) {
    models::cuda::accumulate_classification_metrics(context_->stream(), count, classes,
                                                    logits.data<runtime::bfloat16>(), labels_device, totals);
  } else {
    models::cuda::accumulate_classification_metrics(context_->stream(), count, classes, logits.data<float>(),
                                                    labels_device, totals);
  }
  consumed_[s].record(context_->stream());
  return s;
}

models::cuda::EvalAccumulators GpuTrainStep::end_evaluation() {
  runtime::DeviceGuard on(context_->device());
  models::cuda::EvalAccumulators totals{};
  DTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(&totals, eval_totals_.data(), sizeof(totals), cudaMemcpyDeviceToHost, context_->stream()));
  synchronize();
  return totals;
}

GpuTrainStep::~GpuTrainStep() {
  // Queued work still uses the buffers this object frees.
  cudaStreamSynchronize(copy_stream_.get());
  if (context_) cudaStreamSynchronize(context_->stream());
}

int GpuTrainStep::stage_input(const uint8_t* images, const int32_t* labels, int count, GpuStepTrace* trace,
                              const Batch* deferred) {
  slot_ = (slot_ + 1) % kInputSlots;
  const int s = slot_;
  const size_t image_bytes = images_[s].bytes() / static_cast<size_t>(options_.batch) * static_cast<size_t>(count);
  const size_t label_bytes = sizeof(int32_t) * static_cast<size_t>(count);
  // The copy into this slot waits until the compute stream has consumed its previous contents.
  consumed_[s].make_stream_wait(copy_stream_.get());
  const int copy_span = trace ? trace->begin(copy_stream_.get(), TimelineTrack::kCopyStream, "H2D copy", -1,
                                             static_cast<int64_t>(image_bytes + label_bytes))
                              : -1;
  DTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(images_[s].data(), images, image_bytes, cudaMemcpyHostToDevice, copy_stream_.get()));
  DTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(labels_[s].data(), labels, label_bytes, cudaMemcpyHostToDevice, copy_stream_.get()));
  if (jpeg_ && deferred != nullptr) {
    jpeg_->stage(*deferred, options_.height, options_.width, static_cast<uint8_t*>(images_[s].data()),
                 static_cast<int32_t*>(labels_[s].data()), copy_stream_.get(), s);
  }
  if (trace) trace->end(copy_span, copy_stream_.get());
  copied_[s].record(copy_stream_.get());
  copied_[s].make_stream_wait(context_->stream());
  return s;
}

int GpuTrainStep::run(const uint8_t* images, const int32_t* labels, float lr, const MicroBatch& micro,
                      GpuStepTrace* trace, const Batch* deferred) {
  check_micro_batch(micro);
  DTRAIN_CHECK(micro.count == options_.accumulation_steps)
      << "micro-batch of a step of " << micro.count << " for a GPU step of accumulation_steps "
      << options_.accumulation_steps;
  runtime::DeviceGuard on(context_->device());
  const cudaStream_t stream = context_->stream();
  const int s = stage_input(images, labels, options_.batch, trace, deferred);
  clock_.started(stream);  // after the compute stream's wait for the copy: idle until the input is here
  if (graph_this_step(trace != nullptr || profiler_ != nullptr)) {
    run_graphed(s, lr, micro);
  } else {
    GpuStepProfiler* profile = micro.last() ? std::exchange(profiler_, nullptr) : nullptr;
    queue_compute(s, lr, micro, trace, profile, false);
  }
  clock_.finished(stream);
  if (micro.last()) any_step_ = true;
  return s;
}

void GpuTrainStep::queue_compute(int s, float lr, const MicroBatch& micro, GpuStepTrace* trace,
                                 GpuStepProfiler* profile, bool captured) {
  const cudaStream_t stream = context_->stream();
  // Profiled from here, after the wait for the copy, so the profile holds no PCIe transfer.
  if (profile) profile->begin(stream);
  // Forward counts from the input's normalize-and-cast to the loss.
  int span = trace ? trace->begin(stream, TimelineTrack::kComputeStream, "forward") : -1;
  normalize(images_[s].data(), options_.batch, input_);
  const auto* labels_device = static_cast<const int32_t*>(labels_[s].data());

  loss_and_dlogits(model_->forward(input_, true), labels_device, micro.index);
  // A captured step's slot is consumed once its graph has run: an event recorded inside a capture
  // is no event the copy stream outside could wait for.
  if (!captured) consumed_[s].record(stream);
  if (profile) profile->forward_done(stream);
  if (trace) {
    trace->end(span, stream);
    span = trace->begin(stream, TimelineTrack::kComputeStream, "backward");
  }

  micro_ = micro;
  const bool reduce = sync_ && micro.last();
  // Each bucket's all-reduce between two events on the comm stream, as it runs there, and the
  // phases the backend reports inside it (the hierarchical backend's steps, the staged pieces).
  if (reduce && trace) {
    sync_->set_bucket_observer(
        [this, trace](size_t bucket, size_t bytes, cudaStream_t comm, bool after) -> comm::CallTrace* {
          if (after) {
            trace->end(open_bucket_span_, comm);
            return nullptr;
          }
          open_bucket_span_ = trace->begin(comm, TimelineTrack::kComm, "all-reduce", static_cast<long>(bucket),
                                           static_cast<int64_t>(bytes));
          return trace->bucket_phases(static_cast<long>(bucket));
        });
  }
  if (reduce && !captured) sync_->begin_step();
  if (reduce && captured) capture_buckets_->begin_step();
  profiling_ = profile;
  model_->backward(dlogits_);
  profiling_ = nullptr;
  if (profile) profile->backward_done(stream);
  if (trace) trace->end(span, stream);
  if (!micro.last()) return;
  if (reduce && !captured) sync_->finish();
  if (reduce && captured) finish_in_capture();
  if (reduce && trace) sync_->set_bucket_observer(nullptr);
  // The compute stream waited for the comm stream: the update starts when the buckets are averaged.
  span = trace ? trace->begin(stream, TimelineTrack::kComputeStream, "SGD update") : -1;
  queue_update(lr, captured);
  if (profile) profile->update_done(stream);
  if (trace) trace->end(span, stream);
}

void GpuTrainStep::queue_update(float lr, bool captured) {
  models::cuda::DeviceParameters& params = model_->device_parameters();
  SgdStep step;
  step.count = static_cast<size_t>(params.count());
  step.params = params.params_f32();
  step.momentum = static_cast<float*>(momentum_.data());
  step.ranges = static_cast<const DecayRangeEnd*>(decay_ranges_.data());
  step.range_count = decay_range_count_;
  step.lr = lr;
  step.lr_on_device = captured ? static_cast<const float*>(lr_device_.data()) : nullptr;
  step.mu = static_cast<float>(options_.sgd.momentum);
  step.nesterov = options_.sgd.nesterov;
  step.params_bf16 = context_->bf16() ? params.params_bf16() : nullptr;
  sgd_update<float>(context_->stream(), step, params.grads_f32());
}

void GpuTrainStep::loss_and_dlogits(const runtime::Tensor& logits, const int32_t* labels, int micro_batch) {
  const cudaStream_t stream = context_->stream();
  models::cuda::ensure_device_tensor(dlogits_, context_->activation_dtype(), logits.shape());
  const models::cuda::LossOutputs out{static_cast<float*>(loss_.data()) + micro_batch,
                                      static_cast<int32_t*>(hits_.data()) + micro_batch};
  const int classes = static_cast<int>(logits.shape()[1]);
  if (context_->bf16()) {
    models::cuda::softmax_cross_entropy(stream, options_.batch, classes, logits.data<runtime::bfloat16>(), labels,
                                        options_.label_smoothing, dlogits_.data<runtime::bfloat16>(), out);
  } else {
    models::cuda::softmax_cross_entropy(stream, options_.batch, classes, logits.data<float>(), labels,
                                        options_.label_smoothing, dlogits_.data<float>(), out);
  }
}

void GpuTrainStep::normalize(const void* device_pixels, int count, runtime::Tensor& out) {
  const ImageBatchDims dims{count, options_.height, options_.width, options_.model.in_channels};
  const auto* pixels = static_cast<const uint8_t*>(device_pixels);
  if (context_->bf16()) {
    normalize_images_nhwc_bf16(context_->stream(), dims, pixels, options_.mean, options_.std,
                               out.data<runtime::bfloat16>());
  } else {
    normalize_images_nchw_f32(context_->stream(), dims, pixels, options_.mean, options_.std, out.data<float>());
  }
}

bool GpuTrainStep::input_copied(int slot) {
  return copied_[slot].is_complete();
}

void GpuTrainStep::wait_input_copied(int slot) {
  copied_[slot].synchronize();
}

StepResult GpuTrainStep::last_result() {
  DTRAIN_CHECK(any_step_) << "no step has run yet";
  synchronize();
  const size_t k = static_cast<size_t>(options_.accumulation_steps);
  std::vector<float> losses(k);
  std::vector<int32_t> hits(k);
  DTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(losses.data(), loss_.data(), k * sizeof(float), cudaMemcpyDeviceToHost, context_->stream()));
  DTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(hits.data(), hits_.data(), k * sizeof(int32_t), cudaMemcpyDeviceToHost, context_->stream()));
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(context_->stream()));
  double loss_sum = 0;
  StepResult result;
  for (size_t i = 0; i < k; ++i) {
    loss_sum += losses[i];
    result.top1_hits += hits[i];
  }
  result.mean_loss = static_cast<float>(loss_sum / static_cast<double>(k));
  return result;
}

void GpuTrainStep::synchronize() {
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(context_->stream()));
  // The latest step's all-reduces are done too (the compute stream waited for them); a failed one
  // is reported here, on every rank whose Work failed, before a loss or checkpoint is read.
  if (sync_) sync_->wait_all();
}

void GpuTrainStep::momentum_to_host(std::vector<float>& out) {
  synchronize();
  out.resize(momentum_.bytes() / sizeof(float));
  model_->device_parameters().download_flat(static_cast<const float*>(momentum_.data()), out.data());
}

}  // namespace dtrain::train::cuda
