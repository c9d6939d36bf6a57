// GpuTrainStep's CUDA graphs (on unless DTRAIN_CUDA_GRAPHS=0; gpu_train_step.h says what they
// cover): when a step replays one, capturing it first, and where the step stays eager instead.
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "comm/host/mpi_features.h"
#include "runtime/base/error.h"
#include "runtime/base/log.h"
#include "runtime/cuda/device_allocator.h"
#include "train/engine/cuda/gpu_train_step.h"
#include "train/engine/cuda/sgd_update.h"
#include "train/engine/gradient_bucket_plan.h"

namespace dtrain::train::cuda {
namespace {

// Set after the step is made (the trainer's BN groups): its first step finds it.
const char* const kSyncBnStaysEager = "synchronized BN waits for the host in every BN layer";

}  // namespace

void GpuTrainStep::set_up_graphs() {
  if (!options_.cuda_graphs) {
    graphs_off_why_ = "DTRAIN_CUDA_GRAPHS=0";
    return;
  }
  // The all-reduces stay eager, queued between the graphs as the eager step queues them
  // (report_in_capture). NCCL's and the host-staged backends' (hierarchical, mpi-ring: events,
  // copies and stream flags queued on the comm stream, the host ring on their worker, which makes
  // no CUDA call) need nothing else. Device pointers handed to MPI directly are left out: MPI then
  // calls CUDA from its own thread while the comm stream waits, untried under graphs.
  const bool through_mpi = sync_ && std::string(comm_->name()) != "nccl";
  if (through_mpi && comm::device_pointer_mode() != comm::DevicePointerMode::kStage) {
    graphs_off("gradients cross nodes with device pointers " +
               std::string(comm::device_pointer_mode_name(comm::device_pointer_mode())) +
               " (DTRAIN_MPI_DEVICE_POINTERS); graphs cover nccl and the staged cross-node ring");
  } else if (runtime::device_caching_allocator(context_->device()).graph_pool_bytes() > 0) {
    // The pool is the device's: two graphed steps would share addresses across their streams.
    graphs_off(another_step_holds_graphs());
  } else if (options_.accumulation_steps > 1) {
    graphs_off("accumulation_steps is " + std::to_string(options_.accumulation_steps) +
               "; graphs cover whole-batch steps only");
  } else {
    graphs_ = std::make_unique<StepGraphs>(context_->device(), context_->stream());
    lr_device_ = runtime::Buffer(runtime::MemoryKind::kDevice, sizeof(float), context_->stream());
    if (sync_) bucket_plan_ = gradient_bucket_plan(model_->device_parameters().layout(), options_.buckets);
  }
}

bool GpuTrainStep::graph_this_step(bool traced_or_profiled) {
  if (!graphs_) return false;
  if (context_->batch_stats_reducer() != nullptr) {
    graphs_off(kSyncBnStaysEager);
    return false;
  }
  if (traced_or_profiled) {
    // Their spans are events recorded on the streams between the phases, which a replay skips.
    // The graphs go first: their pool holds a step's activations, which the eager step would
    // otherwise allocate a second time. The next untraced step captures again.
    if (!told_eager_traced_) {
      DTRAIN_LOG(kInfo) << "CUDA graphs: traced and profiled steps run eager (the graphs are captured again after)";
    }
    told_eager_traced_ = true;
    drop_graphs();
    return false;
  }
  // The first steps choose the convolution plans (measuring waits for the GPU) and fill the
  // allocator's cache: a capture then records only kernels.
  if (eager_steps_ < kEagerStepsBeforeCapture) {
    ++eager_steps_;
    return false;
  }
  return true;
}

void GpuTrainStep::run_graphed(int s, float lr, const MicroBatch& micro) {
  const cudaStream_t stream = context_->stream();
  set_device_lr(stream, static_cast<float*>(lr_device_.data()), lr);
  if (!graphs_->has(s)) {
    // Checked at construction too, but two steps made before either captured would both pass
    // there and then share the device's one pool.
    if (!graphs_->holds_pool() && runtime::device_caching_allocator(context_->device()).graph_pool_bytes() > 0) {
      graphs_off(another_step_holds_graphs());
      queue_compute(s, lr, micro, nullptr, nullptr, false);
      return;
    }
    if (sync_) capture_buckets_ = std::make_unique<comm::GradientBuckets>(bucket_plan_);
    capture_reported_.assign(1, {});
    capturing_ = true;
    const std::string failure = graphs_->capture(s, [&] { queue_compute(s, lr, micro, nullptr, nullptr, true); });
    capturing_ = false;
    if (!failure.empty()) {
      graphs_off("the capture failed: " + failure, /*unexpected=*/true);
      queue_compute(s, lr, micro, nullptr, nullptr, false);
      return;
    }
    DTRAIN_CHECK(graphs_->segments(s) == capture_reported_.size())
        << graphs_->segments(s) << " step graphs for " << capture_reported_.size() << " cuts";
    reported_after_[s] = std::move(capture_reported_);
    if (graphs_->captures() == 1) {
      DTRAIN_LOG(kInfo) << "CUDA graphs: the step is captured after " << eager_steps_
                        << " eager steps and replayed from now on (one graph per input slot"
                        << (sync_ ? ", cut at each bucket's all-reduce)" : ")");
    }
  }
  // What the eager step does, with each run of kernels between two all-reduces as one launch.
  const std::vector<std::vector<std::pair<size_t, size_t>>>& reported = reported_after_.at(s);
  if (sync_) sync_->begin_step();
  for (size_t k = 0; k < reported.size(); ++k) {
    graphs_->launch(s, k);
    // The first graph normalizes the slot's images: the slot is free for the next copy after it,
    // as after the eager step's forward, and so marked before a failed all-reduce can throw below.
    if (k == 0) consumed_[s].record(stream);
    for (const auto& [begin, end] : reported[k]) sync_->mark_ready(begin, end);
    if (sync_ && k + 2 == reported.size()) sync_->finish();  // the last graph is the update
  }
  ++graph_replays_;
}

void GpuTrainStep::report_in_capture(size_t begin, size_t end) {
  capture_reported_.back().emplace_back(begin, end);
  bool launches = false;
  capture_buckets_->mark_ready(begin, end, [&](size_t) { launches = true; });
  if (!launches) return;
  graphs_->cut();
  capture_reported_.emplace_back();
}

void GpuTrainStep::finish_in_capture() {
  capture_buckets_->finish_step([](size_t) {});
  graphs_->cut();
  capture_reported_.emplace_back();
}

std::string GpuTrainStep::another_step_holds_graphs() const {
  return "another step on GPU " + std::to_string(context_->device()) + " holds CUDA graphs";
}

void GpuTrainStep::graphs_off(const std::string& why, bool unexpected) {
  graphs_off_why_ = why;
  // Where graphs do not apply (device pointers handed to MPI, accumulation) eager is the plan,
  // not news.
  if (unexpected) {
    DTRAIN_LOG(kWarn) << "CUDA graphs off: " << why << "; the step runs eager";
  } else {
    DTRAIN_LOG0(kInfo) << "CUDA graphs off: " << why << "; the step runs eager";
  }
  graphs_.reset();
}

void GpuTrainStep::drop_graphs() {
  if (graphs_) graphs_->clear();
}

std::string GpuTrainStep::cuda_graphs_report() const {
  std::ostringstream text;
  if (graphs_ && context_->batch_stats_reducer() != nullptr) {
    text << "off: " << kSyncBnStaysEager;
  } else if (graphs_) {
    text << "on (captured after " << kEagerStepsBeforeCapture << " eager steps)";
    if (graphs_->captures() > 0)
      text << ": " << graphs_->captures() << " captures, " << graph_replays_ << " steps replayed";
  } else {
    text << "off: " << graphs_off_why_;
  }
  return text.str();
}

}  // namespace dtrain::train::cuda
