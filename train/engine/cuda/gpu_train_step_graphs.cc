// GpuTrainStep's CUDA graphs (DTRAIN_CUDA_GRAPHS=1; gpu_train_step.h says what they cover): when a
// step replays one, capturing it first, and where the step stays eager instead.
#include <sstream>
#include <string>

#include "runtime/base/log.h"
#include "train/engine/cuda/gpu_train_step.h"
#include "train/engine/cuda/sgd_update.h"

namespace dtrain::train::cuda {

void GpuTrainStep::set_up_graphs() {
  if (!options_.cuda_graphs) {
    graphs_off_why_ = "DTRAIN_CUDA_GRAPHS unset or 0";
    return;
  }
  // Host-staged backends wait for the GPU inside the all-reduce, and NCCL's buckets are queued
  // from the gradient listener in the middle of backward: captured, neither would replay what the
  // eager step does, so averaged steps stay eager for now.
  if (sync_) {
    graphs_off("gradients are averaged over " + std::string(comm_->name()) + "; graphs cover one rank only for now");
  } else if (options_.accumulation_steps > 1) {
    graphs_off("accumulation_steps is " + std::to_string(options_.accumulation_steps) +
               "; graphs cover whole-batch steps only");
  } else {
    graphs_ = std::make_unique<StepGraphs>(context_->device(), context_->stream());
    lr_device_ = runtime::Buffer(runtime::MemoryKind::kDevice, sizeof(float), context_->stream());
  }
}

bool GpuTrainStep::graph_this_step(bool traced_or_profiled) {
  if (!graphs_) return false;
  if (context_->batch_stats_reducer() != nullptr) {
    graphs_off("synchronized BN waits for the host in every BN layer");
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
    const std::string failure = graphs_->capture(s, [&] { queue_compute(s, lr, micro, nullptr, nullptr, true); });
    if (!failure.empty()) {
      graphs_off("the capture failed: " + failure);
      queue_compute(s, lr, micro, nullptr, nullptr, false);
      return;
    }
    if (graphs_->captures() == 1) {
      DTRAIN_LOG(kInfo) << "CUDA graphs: the step is captured after " << eager_steps_
                        << " eager steps and replayed from now on (one graph per input slot)";
    }
  }
  graphs_->launch(s);
  consumed_[s].record(stream);
  ++graph_replays_;
}

void GpuTrainStep::graphs_off(const std::string& why) {
  graphs_off_why_ = why;
  DTRAIN_LOG(kWarn) << "CUDA graphs off (DTRAIN_CUDA_GRAPHS=1): " << why << "; the step runs eager";
  graphs_.reset();
}

void GpuTrainStep::drop_graphs() {
  if (graphs_) graphs_->clear();
}

std::string GpuTrainStep::cuda_graphs_report() const {
  std::ostringstream text;
  if (graphs_) {
    text << "on (captured after " << kEagerStepsBeforeCapture << " eager steps): " << graphs_->captures()
         << " captures, " << graph_replays_ << " steps replayed";
  } else {
    text << "off: " << graphs_off_why_;
  }
  return text.str();
}

}  // namespace dtrain::train::cuda
