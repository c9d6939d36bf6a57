// The GPU's clock of each micro-batch (train/engine/cuda/device_step_clock): a micro-batch queued
// while the stream is still busy starts with no idle gap, one busy micro-batch's length after the
// previous one's start; one queued after the stream drained and the host dawdled starts after
// about that long, and its start is that much further from the previous one's. The "work" is a host function on the
// stream (cudaLaunchHostFunc) that sleeps, so the test needs no kernel of its own.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"
#include "train/engine/cuda/device_step_clock.h"
#endif

namespace dtrain::train {
namespace {

#if DTRAIN_WITH_CUDA
void sleep_on_stream(void* milliseconds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(milliseconds)));
}

TEST(DeviceStepClock, IdleGapsAndStartsApartAreTheStreams) {
  if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
  runtime::CudaStream stream(0);
  cuda::DeviceStepClock clock(0);
  static int busy_ms = 30;
  auto micro_batch = [&] {
    clock.started(stream.get());
    DTRAIN_CUDA_CHECK(cudaLaunchHostFunc(stream.get(), sleep_on_stream, &busy_ms));
    clock.finished(stream.get());
  };
  micro_batch();  // 0: no predecessor (infinity)
  micro_batch();  // 1: queued behind 0, no gap
  stream.synchronize();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the host "waits for data"
  micro_batch();                                               // 2: ~50 ms after 1 ended
  // 20 more, all queued at once behind each other: the ring (16 pairs) wraps while they run.
  for (int i = 0; i < 20; ++i) micro_batch();
  std::vector<DeviceMicroBatchTime> times = clock.take(false);
  const std::vector<DeviceMicroBatchTime> rest = clock.take(true);
  times.insert(times.end(), rest.begin(), rest.end());
  ASSERT_EQ(times.size(), 23u);
  EXPECT_TRUE(std::isinf(times[0].idle)) << "the first micro-batch had nothing before it";
  EXPECT_TRUE(std::isinf(times[0].since));
  EXPECT_LT(times[1].idle, 0.010) << "a micro-batch queued behind a busy stream starts with no gap";
  EXPECT_GT(times[2].idle, 0.040) << "the host's 50 ms after the stream drained";
  EXPECT_LT(times[2].idle, 0.500);
  // Starts apart: the previous micro-batch's 30 ms of work, plus the idle gap before this one. The
  // host function may sleep longer than asked on a loaded machine, never shorter.
  EXPECT_GE(times[1].since, 0.029);
  EXPECT_GE(times[2].since, 0.029 + times[2].idle);
  for (size_t i = 1; i < times.size(); ++i) {
    EXPECT_GE(times[i].since, times[i].idle + 0.029) << "micro-batch " << i;
    EXPECT_LT(times[i].since, times[i].idle + 0.500) << "micro-batch " << i;
  }
  for (size_t i = 3; i < times.size(); ++i) EXPECT_LT(times[i].idle, 0.010) << "micro-batch " << i;
  EXPECT_TRUE(clock.take(true).empty());
}
#else
TEST(DeviceStepClock, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::train
