#include "comm/gradient_sync/gradient_synchronizer.h"

#include <utility>

#include "comm/diagnostics/fault_injection.h"
#include "comm/host/host_reduce.h"
#include "runtime/base/error.h"

namespace dtrain::comm {

GradientSynchronizer::GradientSynchronizer(Communicator& comm, float* gradients, BucketPlan plan, DType wire)
    : comm_(comm), gradients_(gradients), wire_(wire), buckets_(std::move(plan)), work_(buckets_.size()) {
  DTRAIN_USAGE_CHECK(wire == DType::kF32 || wire == DType::kBF16 || wire == DType::kF16)
      << "gradient wire format must be fp32, bf16 or fp16, not " << runtime::dtype_name(wire);
  if (wire != DType::kF32) {
    for (size_t i = 0; i < buckets_.size(); ++i) {
      wire_copy_.emplace_back(runtime::MemoryKind::kHost, (buckets_.end(i) - buckets_.begin(i)) * 2);
    }
  }
  fault_step_ = backward_fault_step_from_env();
}

GradientSynchronizer::~GradientSynchronizer() {
  for (const Work& w : work_) {
    try {
      w.wait();
    } catch (...) {
      // The step was abandoned (finish() reports failures of completed steps).
    }
  }
}

void GradientSynchronizer::PhaseLog::host_phase(const CallPhase& phase) {
  std::lock_guard lock(mutex_);
  phases_.push_back(phase);
}

void GradientSynchronizer::PhaseLog::clear() {
  std::lock_guard lock(mutex_);
  phases_.clear();
}

std::vector<CallPhase> GradientSynchronizer::PhaseLog::phases() const {
  std::lock_guard lock(mutex_);
  return phases_;
}

void GradientSynchronizer::begin_step() {
  ++steps_;
  buckets_.begin_step();
  comm_.set_consistency_check(buckets_.check_calls_this_step());
  for (Work& w : work_) w = Work();
  timed_ = phase_timing_;
  if (!timed_) return;
  // Made once and kept: an abandoned step's all-reduce may still report to its bucket's log.
  if (phase_logs_.empty()) {
    for (size_t i = 0; i < buckets_.size(); ++i) phase_logs_.push_back(std::make_unique<PhaseLog>());
  }
  for (std::unique_ptr<PhaseLog>& log : phase_logs_) log->clear();
}

void GradientSynchronizer::mark_ready(size_t begin, size_t end) {
  buckets_.mark_ready(begin, end, [this](size_t i) { launch(i); });
  if (fault_step_ != 0 && steps_ == fault_step_ && buckets_.launched_during_backward() > 0) {
    DTRAIN_FAIL() << "injected fault in backward (DTRAIN_FAULT_INJECT_BACKWARD): step " << steps_ << ", with "
                  << buckets_.launched_during_backward() << " bucket all-reduce(s) in flight";
  }
}

void GradientSynchronizer::launch(size_t i) {
  Collective call;
  call.count = buckets_.end(i) - buckets_.begin(i);
  call.op = ReduceOp::kAverage;
  call.trace = timed_ ? phase_logs_[i].get() : nullptr;
  float* slice = gradients_ + buckets_.begin(i);
  if (wire_ == DType::kF32) {
    call.send = call.recv = slice;
  } else {
    narrow_from_f32(slice, 1.0f, wire_copy_[i].data(), wire_, call.count);
    call.send = call.recv = wire_copy_[i].data();
    call.dtype = wire_;
  }
  work_[i] = comm_.submit(call);
}

std::vector<GradientSynchronizer::BucketSpan> GradientSynchronizer::bucket_spans() const {
  std::vector<BucketSpan> spans;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const Work::Span ran = work_[i].span();
    spans.push_back({i, (buckets_.end(i) - buckets_.begin(i)) * runtime::dtype_size(wire_), ran.begin, ran.end,
                     timed_ ? phase_logs_[i]->phases() : std::vector<CallPhase>()});
  }
  return spans;
}

void GradientSynchronizer::finish() {
  // Buckets some elements of which were never reported are averaged all the same.
  buckets_.finish_step([this](size_t i) { launch(i); });
  for (size_t i = 0; i < buckets_.size(); ++i) {
    work_[i].wait();
    if (wire_ != DType::kF32) {
      widen_to_f32(wire_copy_[i].data(), wire_, gradients_ + buckets_.begin(i), buckets_.end(i) - buckets_.begin(i));
    }
  }
}

}  // namespace dtrain::comm
