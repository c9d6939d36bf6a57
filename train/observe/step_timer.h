#pragma once
// The training loop's clocks, kept apart from the loop: each step's wall time, the time blocked on
// the loader (on a GPU: the GPU's idle time for want of a batch), per logging interval and per
// epoch, and what the log derives from them (ETA, median step). One rank's view; the trainer
// reduces over the ranks where it reports.
#include <deque>
#include <functional>
#include <vector>

namespace dtrain::train {

// The device's clock of one micro-batch (the GPU engine's timing events on its compute stream).
struct DeviceMicroBatchTime {
  double idle = 0;   // seconds the device sat idle before it started
  double since = 0;  // seconds from the previous micro-batch's start to its own: that one's work
                     // and this one's idle gap, so the device's pace whatever the host's
};

class StepTimer {
 public:
  // `now` gives seconds on a monotonic clock (steady_clock by default; tests pass their own).
  // The epoch, and the first logging interval, start at construction.
  explicit StepTimer(std::function<double()> now = {});

  void begin_step();
  // Call when the loader handed over the step's batch: the time since begin_step() (or since
  // begin_wait()) was a wait, returned, and counted unless waits are counted from the device.
  double batch_arrived();
  // The step asks for another batch (a further micro-batch of gradient accumulation): the time
  // from here to batch_arrived() is a wait too.
  void begin_wait();
  void end_step();
  // On a device the host runs ahead of, the host's wait is not the step's: from here on only
  // add_device_wait() counts, with the time the device sat idle for want of the batch.
  void count_waits_on_device() { waits_on_device_ = true; }
  void add_device_wait(double seconds);
  // An optimizer step's length on the device (its micro-batches' starts apart). Once any is given,
  // median_step_seconds() is the device's: the host queues steps ahead of a GPU, and how long the
  // host spent on a step depends on where it blocked (on the loader, on a full queue, on a loss it
  // read), not on how fast the GPU trained.
  void add_device_step(double seconds) { device_step_seconds_.push_back(seconds); }

  struct Interval {
    double seconds = 0;
    double wait_fraction = 0;  // of `seconds`, blocked on the loader
  };
  // The logging interval since the previous call (or the start), and a new one starts.
  Interval take_interval();

  long steps() const { return static_cast<long>(step_seconds_.size()); }
  double elapsed() const { return now_() - start_; }
  // Seconds still to go for `steps_left` more steps at this epoch's pace so far.
  double eta(long steps_left) const;
  // The epoch's share of elapsed() blocked on the loader.
  double wait_fraction() const;
  // The median step time after min(warmup, steps / 2) warm-up steps, on the device where its
  // steps were given (add_device_step), else on the host; 0 before any step.
  double median_step_seconds(long warmup) const;

 private:
  std::function<double()> now_;
  double start_ = 0;
  double step_start_ = 0;
  double wait_start_ = 0;
  double interval_start_ = 0;
  double interval_wait_ = 0;
  double epoch_wait_ = 0;
  bool waits_on_device_ = false;
  std::vector<double> step_seconds_;
  std::vector<double> device_step_seconds_;
};

// The data wait on a device the host runs ahead of: each micro-batch's host wait for its batch,
// paired in order with the device's idle gap before it (read later, as the device's events
// complete); the pair's data wait is the shorter of the two.
class DeviceWaitPairing {
 public:
  void host_waited(double seconds) { waits_.push_back(seconds); }
  // The summed data wait of the pairs these gaps complete (gaps beyond the waits are dropped).
  double pair(const std::vector<double>& gaps);
  size_t unpaired() const { return waits_.size(); }

 private:
  std::deque<double> waits_;
};

}  // namespace dtrain::train
