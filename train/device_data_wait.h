#pragma once
// The data wait on a GPU: the host queues steps ahead of the GPU, so a batch it waited for may
// still have been in time. A micro-batch's wait counts as far as the GPU was idle before it:
// min(the host's wait, the GPU's idle gap), paired in order as the engine reads its events
// (DeviceWaitPairing, step_timer.h). On the CPU path the host's wait is the step's, and StepTimer
// counts it itself; then this does nothing.
#include "train/engine/step_engine.h"
#include "train/observe/step_timer.h"

namespace dtrain::train {

class DeviceDataWait {
 public:
  // From here on `timer` counts only the waits this settles, where the engine runs ahead.
  DeviceDataWait(StepEngine& engine, StepTimer& timer)
      : engine_(engine), timer_(timer), on_device_(engine.waits_on_device()) {
    if (on_device_) timer_.count_waits_on_device();
  }
  // The host waited `seconds` for the batch of the train_step it just queued.
  void host_waited(double seconds) {
    if (on_device_) pairing_.host_waited(seconds);
  }
  // Pairs the idle gaps the device has reported so far (all: waits for every queued step) with the
  // host's waits, and adds their data wait to the timer.
  void settle(bool all) {
    if (on_device_) timer_.add_device_wait(pairing_.pair(engine_.take_device_idle(all)));
  }

 private:
  StepEngine& engine_;
  StepTimer& timer_;
  bool on_device_;
  DeviceWaitPairing pairing_;
};

}  // namespace dtrain::train
