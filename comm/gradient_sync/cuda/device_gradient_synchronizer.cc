#include "comm/gradient_sync/cuda/device_gradient_synchronizer.h"

#include <exception>
#include <string>
#include <utility>

#include "runtime/base/log.h"

namespace dtrain::comm {

DeviceGradientSynchronizer::DeviceGradientSynchronizer(Communicator& comm, float* gradients, BucketPlan plan,
                                                       cudaStream_t compute, int device)
    : comm_(comm),
      gradients_(gradients),
      compute_(compute),
      comm_stream_(device, -1),
      buckets_(std::move(plan)),
      reduced_(device, false) {
  // On `device`, whatever the current device: they are recorded on its streams.
  ready_.reserve(buckets_.size());
  for (size_t i = 0; i < buckets_.size(); ++i) ready_.emplace_back(device, false);
}

DeviceGradientSynchronizer::~DeviceGradientSynchronizer() {
  try {
    wait_all();
  } catch (const std::exception& e) {
    if (std::uncaught_exceptions() > 0) return;  // already on the way out with an error
    // Throwing from a destructor is not an option; a failed average must not pass silently.
    runtime::write_log_line(runtime::LogLevel::kError, std::string("gradient all-reduce failed: ") + e.what());
    std::terminate();
  }
}

void DeviceGradientSynchronizer::begin_step() {
  buckets_.begin_step();
  comm_.set_consistency_check(buckets_.check_calls_this_step());
}

void DeviceGradientSynchronizer::mark_ready(size_t begin, size_t end) {
  buckets_.mark_ready(begin, end, [this](size_t i) { launch(i); });
}

void DeviceGradientSynchronizer::launch(size_t i) {
  ready_[i].record(compute_);
  ready_[i].make_stream_wait(comm_stream_.get());
  float* data = gradients_ + buckets_.begin(i);
  const size_t count = buckets_.end(i) - buckets_.begin(i);
  Collective call;
  call.send = call.recv = data;
  call.count = count;
  call.op = ReduceOp::kAverage;
  call.where = Location::gpu(comm_stream_.get());
  if (observer_) call.trace = observer_(i, count * sizeof(float), comm_stream_.get(), false);
  this_step_.push_back(comm_.submit(call));
  if (observer_) observer_(i, count * sizeof(float), comm_stream_.get(), true);
}

void DeviceGradientSynchronizer::finish() {
  buckets_.finish_step([this](size_t i) { launch(i); });
  reduced_.record(comm_stream_.get());
  reduced_.make_stream_wait(compute_);
  // The previous step's transfers finished while this step was queued; a failure among them, or
  // one of this step's already known, throws here.
  std::vector<Work> earlier = std::exchange(previous_step_, std::move(this_step_));
  this_step_.clear();
  try {
    Work::all_of(std::move(earlier)).wait();
    for (const Work& w : previous_step_) w.test();
  } catch (...) {
    previous_step_.clear();  // reported once, here
    throw;
  }
}

void DeviceGradientSynchronizer::wait_all() {
  std::vector<Work> works = std::move(previous_step_);
  works.insert(works.end(), this_step_.begin(), this_step_.end());
  previous_step_.clear();
  this_step_.clear();
  Work::all_of(std::move(works)).wait();
}

}  // namespace dtrain::comm
