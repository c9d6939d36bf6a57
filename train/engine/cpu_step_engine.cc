// The CPU reference engine: the host ResNet, gradients averaged by the GradientSynchronizer while
// backward runs, one fused host SGD step; with accumulation_steps K, K micro-batches per step
// (gradient_accumulation.h). With bn_sync_group > 1 its BN layers normalize with the statistics of
// the rank's BN group (batch_norm_group.h).
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/backends/factory.h"
#include "comm/diagnostics/stall_inspector.h"
#include "comm/gradient_sync/gradient_synchronizer.h"
#include "models/cpu/softmax_cross_entropy.h"
#include "models/resnet.h"
#include "runtime/base/error.h"
#include "runtime/memory/dtype.h"
#include "train/engine/batch_norm_group.h"
#include "train/engine/gradient_accumulation.h"
#include "train/engine/gradient_bucket_plan.h"
#include "train/engine/sgd.h"
#include "train/engine/step_engine.h"

namespace dtrain::train {
namespace {

class CpuStepEngine final : public StepEngine {
 public:
  CpuStepEngine(const EngineSetup& setup, std::unique_ptr<comm::Communicator> comm,
                std::unique_ptr<models::BatchStatsReducer> bn_group)
      : setup_(setup), model_(setup.model), comm_(std::move(comm)), bn_group_(std::move(bn_group)) {
    const TrainConfig& c = setup.config.fields;
    models::ParameterSet& params = model_.parameters();
    sync_ = std::make_unique<comm::GradientSynchronizer>(
        *comm_, params.grads_flat(), gradient_bucket_plan(params, gradient_bucket_sizes(c)),
        // auto is fp32 for CPU jobs (comm::choose_wire); bf16 or fp16 narrows every bucket.
        setup.config.gradient_wire_dtype.value_or(runtime::DType::kF32));
    // Synchronized BN: every BN layer exchanges its statistics over this rank's group.
    DTRAIN_CHECK((bn_group_ ? bn_group_->group_size() : 1) == c.bn_sync_group())
        << "bn_sync_group " << c.bn_sync_group() << " needs a BN group of that size (make_batch_norm_group)";
    model_.set_batch_stats_reducer(bn_group_.get());
    // Each finished range is folded into the micro-batch sum; the last micro-batch's ranges (then
    // the mean) go to the all-reduce, the earlier ones to no collective at all.
    params.set_gradient_listener([this](int64_t begin, int64_t end) {
      const size_t b = static_cast<size_t>(begin), n = static_cast<size_t>(end - begin);
      accumulate_gradient_range(micro_, model_.parameters().grads_flat() + b, gradient_sum_.data() + b, n);
      if (micro_.last()) sync_->mark_ready(b, b + n);
      if (profiling_) {
        profiling_->gradients.push_back({begin, end - begin, runtime::steady_seconds() - backward_began_});
      }
    });
    sgd_ = std::make_unique<Sgd>(
        static_cast<size_t>(params.flat_size()),
        decay_ranges(params, static_cast<float>(c.weight_decay()), c.exclude_norm_and_bias_from_decay()),
        SgdOptions{c.momentum(), c.weight_decay(), c.nesterov()});
    // Rank 0's initial weights and BN statistics everywhere.
    load_from_host();
  }

  std::string describe() const override {
    const std::optional<runtime::DType> wire = setup_.config.gradient_wire_dtype;
    return wire && *wire != runtime::DType::kF32 ? std::string("cpu, gradient buckets in ") + runtime::dtype_name(*wire)
                                                 : std::string("cpu");
  }

  void train_step(const Batch& b, float lr, const MicroBatch& micro) override {
    check_micro_batch(micro);
    TimelineRecorder* trace = std::exchange(trace_, nullptr);
    // Profiled: the last micro-batch, the one whose backward all-reduces.
    StepPhases* profile = micro.last() ? std::exchange(profile_, nullptr) : nullptr;
    const bool clocked = trace || profile;
    const double started = clocked ? runtime::steady_seconds() : 0;
    models::ParameterSet& params = model_.parameters();
    if (micro.count > 1) gradient_sum_.resize(static_cast<size_t>(params.flat_size()));
    const runtime::Tensor& logits = model_.forward(normalized(b, input_), true);
    models::ensure_shape(dlogits_, logits.shape());
    const double loss = models::cpu::softmax_cross_entropy(
        b.size, static_cast<int>(logits.shape()[1]), logits.data<float>(), b.labels.data(),
        setup_.config.fields.label_smoothing(), dlogits_.data<float>());
    loss_sum_ = micro.index == 0 ? loss : loss_sum_ + loss;
    micro_ = micro;
    const double forward_done = clocked ? runtime::steady_seconds() : 0;
    if (micro.last()) {
      sync_->set_phase_timing(trace != nullptr);
      sync_->begin_step();
    }
    backward_began_ = forward_done;
    profiling_ = profile;
    model_.backward(dlogits_);
    profiling_ = nullptr;
    const double backward_done = clocked ? runtime::steady_seconds() : 0;
    finished_.push_back(&b);
    if (!micro.last()) {
      if (trace) add_spans(*trace, micro, {started, forward_done, backward_done, 0, 0});
      return;
    }
    sync_->finish();
    const double averaged = clocked ? runtime::steady_seconds() : 0;
    sgd_->step(params.params_flat(), params.grads_flat(), lr);
    loss_ = loss_sum_ / micro.count;
    const double updated = clocked ? runtime::steady_seconds() : 0;
    if (trace) add_spans(*trace, micro, {started, forward_done, backward_done, averaged, updated});
    if (profile) {
      profile->forward = forward_done - started;
      profile->backward = backward_done - forward_done;
      profile->optimizer = updated - averaged;
    }
  }

  void profile_next_step(StepPhases* out) override { profile_ = out; }

  void trace_next_step(TimelineRecorder* recorder, long step) override {
    trace_ = recorder;
    trace_step_ = step;
  }

  // The CPU engine is done with a batch when its step returns.
  std::vector<const Batch*> finished_batches(bool) override { return std::exchange(finished_, {}); }
  int max_batches_held() const override { return 1; }

  double last_loss() override { return loss_; }
  bool loss_is_free() const override { return true; }

  void begin_evaluation() override { totals_ = EvalTotals{}; }
  void evaluate(const Batch& b) override {
    const runtime::Tensor& logits = model_.forward(normalized(b, eval_input_), false);
    const int classes = static_cast<int>(logits.shape()[1]);
    const float* z = logits.data<float>();
    totals_.loss_sum += b.size * models::cpu::softmax_cross_entropy(b.size, classes, z, b.labels.data(), 0.0,
                                                                    static_cast<float*>(nullptr));
    for (int i = 0; i < b.size; ++i) {
      count_hits(z + static_cast<size_t>(i) * classes, classes, b.labels[static_cast<size_t>(i)], &totals_.top1,
                 &totals_.top5);
    }
    totals_.images += b.size;
    finished_.push_back(&b);
  }
  EvalTotals end_evaluation() override { return totals_; }

  models::ParameterSet& parameters() override { return model_.parameters(); }
  std::vector<float>& momentum() override { return sgd_->momentum_buffer(); }
  void sync_to_host() override {}  // the replica is the mirror
  void load_from_host() override {
    models::ParameterSet& params = model_.parameters();
    comm_->broadcast(params.params_flat(), static_cast<size_t>(params.flat_size()), runtime::DType::kF32, 0).wait();
    comm_->broadcast(params.state_flat(), static_cast<size_t>(params.state_count()), runtime::DType::kF32, 0).wait();
    comm_->broadcast(sgd_->momentum_buffer().data(), sgd_->momentum_buffer().size(), runtime::DType::kF32, 0).wait();
  }
  size_t gradient_buckets() const override { return sync_->bucket_count(); }
  void set_backbone_lr_scale(float scale) override {
    const TrainConfig& c = setup_.config.fields;
    sgd_->set_ranges(decay_ranges(model_.parameters(), static_cast<float>(c.weight_decay()),
                                  c.exclude_norm_and_bias_from_decay(), scale));
  }

 private:
  // The step's phases on the step loop's thread (normalizing the input counts as forward), and
  // each bucket's all-reduce as it ran on the communicator's worker thread, with the phases the
  // backend reports inside it (the hierarchical backend's intra-node and cross-node steps).
  // With accumulation, a micro-batch but the last has its forward and backward only, each span
  // marked with its micro-batch.
  void add_spans(TimelineRecorder& trace, const MicroBatch& micro, const std::array<double, 5>& t) const {
    const TimelineTrack loop = TimelineTrack::kStepLoop;
    const int index = micro.count > 1 ? micro.index : -1;
    trace.add({loop, "forward", trace_step_, t[0], t[1], -1, -1, index});
    trace.add({loop, "backward", trace_step_, t[1], t[2], -1, -1, index});
    if (!micro.last()) return;
    // Blocked in finish() on the buckets still in flight when backward ended.
    trace.add({loop, "gradient wait", trace_step_, t[2], t[3]});
    trace.add({loop, "SGD update", trace_step_, t[3], t[4]});
    for (const comm::GradientSynchronizer::BucketSpan& s : sync_->bucket_spans()) {
      if (std::isnan(s.begin) || std::isnan(s.end)) continue;  // a backend that does not say
      trace.add({TimelineTrack::kComm, "all-reduce", trace_step_, s.begin, s.end, static_cast<long>(s.bucket),
                 static_cast<int64_t>(s.bytes)});
      for (const comm::CallPhase& p : s.phases) {
        trace.add({TimelineTrack::kComm, p.name, trace_step_, p.begin, p.end, static_cast<long>(s.bucket), p.bytes, -1,
                   p.piece});
      }
    }
  }

  // The batch's uint8 NHWC pixels as normalized fp32 NCHW in `out`.
  const runtime::Tensor& normalized(const Batch& b, runtime::Tensor& out) const {
    const ImageShape& s = setup_.image;
    models::ensure_shape(out, {b.size, s.channels, s.height, s.width});
    normalize_batch(static_cast<const uint8_t*>(b.pixels.data()), b.size, s, setup_.mean, setup_.std,
                    PixelLayout::kNchw, out.data<float>());
    return out;
  }

  EngineSetup setup_;
  models::ResNet model_;
  std::unique_ptr<comm::Communicator> comm_;
  std::unique_ptr<models::BatchStatsReducer> bn_group_;  // null: bn_sync_group 1
  std::unique_ptr<comm::GradientSynchronizer> sync_;
  std::unique_ptr<Sgd> sgd_;
  MicroBatch micro_;                 // of the step in progress
  std::vector<float> gradient_sum_;  // the micro-batches' running sum (accumulation_steps > 1)
  double loss_sum_ = 0;              // of the step's micro-batches so far
  runtime::Tensor input_, dlogits_, eval_input_;
  std::vector<const Batch*> finished_;
  EvalTotals totals_;
  double loss_ = 0;
  TimelineRecorder* trace_ = nullptr;  // the next step's, while the timeline records it
  long trace_step_ = 0;
  StepPhases* profile_ = nullptr;    // the next step's phases, while --profile-steps covers it
  StepPhases* profiling_ = nullptr;  // the backward in progress reports its ranges here
  double backward_began_ = 0;
};

}  // namespace

std::unique_ptr<StepEngine> make_cpu_step_engine(const EngineSetup& setup, const runtime::RankContext& ctx) {
  const TrainConfig& c = setup.config.fields;
  comm::set_stall_settings({c.stall_warning_seconds(), c.stall_abort_seconds()});
  // The communicator's own wire stays fp32 on CPUs (auto says so in its log line); an explicit
  // bf16 or fp16 is the synchronizer's, for every bucket.
  std::unique_ptr<comm::Communicator> comm = comm::make_communicator(setup.config.backend, ctx, false, std::nullopt);
  return make_cpu_step_engine(setup, std::move(comm), make_batch_norm_group(ctx, c.bn_sync_group()));
}

std::unique_ptr<StepEngine> make_cpu_step_engine(const EngineSetup& setup, std::unique_ptr<comm::Communicator> comm,
                                                 std::unique_ptr<models::BatchStatsReducer> bn_group) {
  return std::make_unique<CpuStepEngine>(setup, std::move(comm), std::move(bn_group));
}

}  // namespace dtrain::train
