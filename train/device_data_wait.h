#pragma once
// The GPU's own account of an epoch's steps, where the host queues steps ahead of the GPU and its
// own clocks say where it blocked rather than how the GPU fared:
// - the data wait: a batch the host waited for may still have been in time, so a micro-batch's
//   wait counts as far as the GPU was idle before it: min(the host's wait, the GPU's idle gap),
//   paired in order as the engine reads its events (DeviceWaitPairing, step_timer.h);
// - the steps' lengths for the epoch's median step: each optimizer step's micro-batches' starts
//   apart on the GPU.
// On the CPU path the host's wait and step are the step's, and StepTimer counts them itself; then
// this does nothing.
#include <functional>
#include <utility>
#include <vector>

#include "train/engine/step_engine.h"
#include "train/observe/step_timer.h"

namespace dtrain::train {

class DeviceDataWait {
 public:
  // From here on `timer` counts only the waits this settles, where the engine runs ahead. An
  // optimizer step is `micro_batches` train_steps (gradient accumulation); the epoch's first
  // train_step is the first this reads (the previous epoch settled all of its own).
  DeviceDataWait(StepEngine& engine, StepTimer& timer, int micro_batches)
      : DeviceDataWait(
            engine.waits_on_device(), [&engine](bool all) { return engine.take_device_times(all); }, timer,
            micro_batches) {}
  // The same with the device's times from `take_times` (StepEngine::take_device_times), or none
  // where `on_device` is false.
  using TimesSource = std::function<std::vector<DeviceMicroBatchTime>(bool all)>;
  DeviceDataWait(bool on_device, TimesSource take_times, StepTimer& timer, int micro_batches)
      : take_times_(std::move(take_times)), timer_(timer), on_device_(on_device), micro_batches_(micro_batches) {
    if (on_device_) timer_.count_waits_on_device();
  }
  // The host waited `seconds` for the batch of the train_step it just queued.
  void host_waited(double seconds) {
    if (on_device_) pairing_.host_waited(seconds);
  }
  // Reads the device's times reported so far (all: those of every queued step): pairs the idle
  // gaps with the host's waits, adding their data wait to the timer, and gives the timer each
  // optimizer step whose micro-batches are all read.
  void settle(bool all) {
    if (!on_device_) return;
    std::vector<double> gaps;
    for (const DeviceMicroBatchTime& t : take_times_(all)) {
      gaps.push_back(t.idle);
      step_seconds_ += t.since;
      if (++read_ % micro_batches_ == 0) {
        timer_.add_device_step(step_seconds_);
        step_seconds_ = 0;
      }
    }
    timer_.add_device_wait(pairing_.pair(gaps));
  }

 private:
  TimesSource take_times_;
  StepTimer& timer_;
  bool on_device_;
  int micro_batches_;
  long read_ = 0;            // train_steps read so far
  double step_seconds_ = 0;  // the step being read, so far
  DeviceWaitPairing pairing_;
};

}  // namespace dtrain::train
