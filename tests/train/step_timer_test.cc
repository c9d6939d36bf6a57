// StepTimer on a clock the test moves: step times, loader waits per interval and per epoch, the
// median after warm-up (the host's, or the device's steps where given), and the ETA; DeviceDataWait
// on device times the test hands it.
#include "train/observe/step_timer.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "train/device_data_wait.h"

namespace dtrain::train {
namespace {

struct FakeClock {
  double now = 100.0;
  std::function<double()> fn() {
    return [this] { return now; };
  }
};

// Gradient accumulation: a step waits for each of its micro-batches; only those waits count, not
// the compute between them, and the step's time is the whole of it.
TEST(StepTimer, EveryMicroBatchWaitOfAStepCounts) {
  FakeClock clock;
  StepTimer timer(clock.fn());
  timer.begin_step();
  clock.now += 0.5;  // waits for micro-batch 1
  timer.batch_arrived();
  clock.now += 2.0;  // computes it
  timer.begin_wait();
  clock.now += 0.25;  // waits for micro-batch 2
  timer.batch_arrived();
  clock.now += 2.0;
  timer.begin_wait();
  timer.batch_arrived();  // micro-batch 3 was ready
  clock.now += 1.25;
  timer.end_step();
  EXPECT_EQ(timer.steps(), 1);
  EXPECT_DOUBLE_EQ(timer.median_step_seconds(0), 6.0);
  EXPECT_DOUBLE_EQ(timer.wait_fraction(), 0.75 / 6.0);
  EXPECT_DOUBLE_EQ(timer.take_interval().wait_fraction, 0.75 / 6.0);
}

// On a GPU the host queues ahead: its wait is returned (the trainer pairs it with the GPU's idle
// gap) but only what add_device_wait() reports counts, in the interval and the epoch alike.
TEST(StepTimer, OnADeviceOnlyTheDevicesWaitCounts) {
  FakeClock clock;
  StepTimer timer(clock.fn());
  timer.count_waits_on_device();
  timer.begin_step();
  clock.now += 0.75;  // the host blocked on the loader
  EXPECT_DOUBLE_EQ(timer.batch_arrived(), 0.75);
  clock.now += 0.25;
  timer.end_step();
  timer.add_device_wait(0.1);  // of which the GPU lost this much
  clock.now += 1.0;
  EXPECT_DOUBLE_EQ(timer.take_interval().wait_fraction, 0.1 / 2.0);
  timer.add_device_wait(0.3);  // read later, as the GPU's events complete
  clock.now += 1.0;
  EXPECT_DOUBLE_EQ(timer.take_interval().wait_fraction, 0.3 / 1.0);
  EXPECT_DOUBLE_EQ(timer.wait_fraction(), 0.4 / 3.0);
}

// Host waits and device gaps pair in order as the gaps arrive, a few micro-batches late; each
// pair counts the shorter: a wait the GPU covered with queued work counts only the GPU's idle
// part, a GPU gap the host did not cause (a loss read-back) counts only the host's wait.
TEST(DeviceWaitPairing, EachMicroBatchCountsTheShorterOfItsWaitAndItsGap) {
  DeviceWaitPairing pairing;
  pairing.host_waited(0.5);  // the engine's first: its gap is infinite
  pairing.host_waited(0.2);  // the GPU had queued work for 0.15 of it
  pairing.host_waited(0.0);  // batch ready; the GPU idled 0.3 for another reason
  EXPECT_DOUBLE_EQ(pairing.pair({}), 0.0);
  EXPECT_DOUBLE_EQ(pairing.pair({std::numeric_limits<double>::infinity()}), 0.5);
  EXPECT_EQ(pairing.unpaired(), 2u);
  EXPECT_DOUBLE_EQ(pairing.pair({0.05, 0.3}), 0.05 + 0.0);
  EXPECT_EQ(pairing.unpaired(), 0u);
  EXPECT_DOUBLE_EQ(pairing.pair({0.7}), 0.0) << "a gap without a wait counts nothing";
}

TEST(StepTimer, IntervalsWaitsMedianAndEta) {
  FakeClock clock;
  StepTimer timer(clock.fn());
  // Four steps: waits 0.5, 0, 0, 0.25 s on the loader; the steps take 2, 1, 3, 1 s in all.
  const double waits[] = {0.5, 0.0, 0.0, 0.25};
  const double totals[] = {2.0, 1.0, 3.0, 1.0};
  for (int i = 0; i < 4; ++i) {
    timer.begin_step();
    clock.now += waits[i];
    timer.batch_arrived();
    clock.now += totals[i] - waits[i];
    timer.end_step();
    if (i == 1) {
      const StepTimer::Interval first = timer.take_interval();
      EXPECT_DOUBLE_EQ(first.seconds, 3.0);
      EXPECT_DOUBLE_EQ(first.wait_fraction, 0.5 / 3.0);
    }
  }
  const StepTimer::Interval second = timer.take_interval();
  EXPECT_DOUBLE_EQ(second.seconds, 4.0);
  EXPECT_DOUBLE_EQ(second.wait_fraction, 0.25 / 4.0);
  EXPECT_EQ(timer.steps(), 4);
  EXPECT_DOUBLE_EQ(timer.elapsed(), 7.0);
  EXPECT_DOUBLE_EQ(timer.wait_fraction(), 0.75 / 7.0);
  // 7 s for 4 steps: 6 more take 10.5 s.
  EXPECT_DOUBLE_EQ(timer.eta(6), 10.5);
  EXPECT_DOUBLE_EQ(timer.eta(0), 0.0);
  // No warm-up: the upper median of {2, 1, 3, 1} is 2. Warm-up is capped at half the steps, so
  // 1 and 100 both drop the first step ({1, 3, 1}: 1) and the first two ({3, 1}: 3).
  EXPECT_DOUBLE_EQ(timer.median_step_seconds(0), 2.0);
  EXPECT_DOUBLE_EQ(timer.median_step_seconds(1), 1.0);
  EXPECT_DOUBLE_EQ(timer.median_step_seconds(100), 3.0);
}

// On a GPU the host's step lasts as long as wherever it blocked; the device's steps, once given,
// set the median instead (after the same warm-up).
TEST(StepTimer, TheDevicesStepsSetTheMedianOnceGiven) {
  FakeClock clock;
  StepTimer timer(clock.fn());
  timer.count_waits_on_device();
  for (double host : {0.5, 0.1, 0.1, 0.9}) {
    timer.begin_step();
    clock.now += host;
    timer.end_step();
  }
  EXPECT_DOUBLE_EQ(timer.median_step_seconds(0), 0.5) << "no device steps yet: the host's {0.5, 0.1, 0.1, 0.9}";
  for (double device : {9.0, 0.3, 0.3, 0.4}) timer.add_device_step(device);
  EXPECT_DOUBLE_EQ(timer.median_step_seconds(0), 0.4);
  EXPECT_DOUBLE_EQ(timer.median_step_seconds(1), 0.3) << "warm-up drops the first device step";
}

// DeviceDataWait reads the device's micro-batch times as they come: each micro-batch's idle gap
// pairs with the host's wait for it, and each optimizer step's length is its micro-batches'
// starts apart, summed (2 micro-batches a step here), whatever the batches the reads come in.
TEST(DeviceDataWait, PairsGapsAndSumsEachStepsMicroBatches) {
  FakeClock clock;
  StepTimer timer(clock.fn());
  std::vector<std::vector<DeviceMicroBatchTime>> reads = {
      {{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()}, {0.0, 1.0}, {0.5, 1.5}},
      {},
      {{0.0, 1.0}, {0.25, 1.25}, {0.0, 1.0}}};
  size_t next = 0;
  DeviceDataWait waits(
      true, [&](bool) { return next < reads.size() ? reads[next++] : std::vector<DeviceMicroBatchTime>{}; }, timer, 2);
  for (double host : {0.0, 0.0, 1.0, 0.0, 0.1, 0.0}) waits.host_waited(host);
  waits.settle(false);  // micro-batches 0-2: one whole step (0 and 1), half of the next
  EXPECT_DOUBLE_EQ(timer.median_step_seconds(0), std::numeric_limits<double>::infinity())
      << "the first step has no predecessor";
  waits.settle(false);  // nothing new
  waits.settle(true);   // micro-batches 3-5: the second and third steps
  // Steps: {inf, 1.5 + 1.0, 1.25 + 1.0}; after one warm-up step, the upper median of {2.5, 2.25}.
  EXPECT_DOUBLE_EQ(timer.median_step_seconds(1), 2.5);
  // Waits: min(1.0, 0.5) for micro-batch 2, min(0.1, 0.25) for 4; the first (inf gap) paired with 0.
  clock.now += 10.0;
  EXPECT_DOUBLE_EQ(timer.wait_fraction(), (0.5 + 0.1) / 10.0);
}

// Off a device nothing is read and the host's steps stay the median.
TEST(DeviceDataWait, DoesNothingOffADevice) {
  FakeClock clock;
  StepTimer timer(clock.fn());
  bool read = false;
  DeviceDataWait waits(
      false,
      [&](bool) {
        read = true;
        return std::vector<DeviceMicroBatchTime>{{1.0, 1.0}};
      },
      timer, 1);
  timer.begin_step();
  clock.now += 0.25;
  timer.end_step();
  waits.host_waited(0.25);
  waits.settle(true);
  EXPECT_FALSE(read);
  EXPECT_DOUBLE_EQ(timer.median_step_seconds(0), 0.25);
}

TEST(StepTimer, NoStepsYet) {
  FakeClock clock;
  StepTimer timer(clock.fn());
  EXPECT_EQ(timer.steps(), 0);
  EXPECT_DOUBLE_EQ(timer.median_step_seconds(5), 0.0);
  EXPECT_DOUBLE_EQ(timer.eta(10), 0.0);
  EXPECT_DOUBLE_EQ(timer.wait_fraction(), 0.0);
  const StepTimer::Interval empty = timer.take_interval();
  EXPECT_DOUBLE_EQ(empty.seconds, 0.0);
  EXPECT_DOUBLE_EQ(empty.wait_fraction, 0.0);
}

}  // namespace
}  // namespace dtrain::train
