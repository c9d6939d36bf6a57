// The GPU's idle gap before each micro-batch (train/engine/cuda/device_idle_clock): a micro-batch
// queued while the stream is still busy starts with no gap; one queued after the stream drained
// and the host dawdled starts after about that long. The "work" is a host function on the stream
// (cudaLaunchHostFunc) that sleeps, so the test needs no kernel of its own.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"
#include "train/engine/cuda/device_idle_clock.h"
#endif

namespace dtrain::train {
namespace {

#if DTRAIN_WITH_CUDA
void sleep_on_stream(void* milliseconds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(milliseconds)));
}

TEST(DeviceIdleClock, GapsAreTheStreamsIdleTimeBetweenMicroBatches) {
  if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
  runtime::CudaStream stream(0);
  cuda::DeviceIdleClock clock(0);
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
  std::vector<double> gaps = clock.take_idle(false);
  const std::vector<double> rest = clock.take_idle(true);
  gaps.insert(gaps.end(), rest.begin(), rest.end());
  ASSERT_EQ(gaps.size(), 23u);
  EXPECT_TRUE(std::isinf(gaps[0])) << "the first micro-batch had nothing before it";
  EXPECT_LT(gaps[1], 0.010) << "a micro-batch queued behind a busy stream starts with no gap";
  EXPECT_GT(gaps[2], 0.040) << "the host's 50 ms after the stream drained";
  EXPECT_LT(gaps[2], 0.500);
  for (size_t i = 3; i < gaps.size(); ++i) EXPECT_LT(gaps[i], 0.010) << "micro-batch " << i;
  EXPECT_TRUE(clock.take_idle(true).empty());
}
#else
TEST(DeviceIdleClock, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::train
