// GPU pieces of runtime: streams, events, the device caching allocator, pinned memory.
// Registered everywhere; skips, saying why, where there is no CUDA build or no GPU.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/memory/buffer.h"
#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_allocator.h"
#include "runtime/cuda/stream.h"
#endif

namespace dtrain::runtime {
namespace {

class CudaTest : public testing::Test {
 protected:
  void SetUp() override {
#if !DTRAIN_WITH_CUDA
    GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
#else
    if (detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
    DTRAIN_CUDA_CHECK(cudaSetDevice(0));
#endif
  }
};

#if DTRAIN_WITH_CUDA

TEST_F(CudaTest, StreamEventOrderingAndTiming) {
  CudaStream producer(0);
  CudaStream consumer(0);
  const size_t n = 1 << 24;
  Buffer src(MemoryKind::kDevice, n);
  Buffer dst(MemoryKind::kDevice, n);
  Buffer host(MemoryKind::kPinnedHost, n);
  ASSERT_TRUE(host.is_page_locked());
  CudaEvent start(true), copied(true);
  start.record(producer.get());
  DTRAIN_CUDA_CHECK(cudaMemsetAsync(src.data(), 0x5a, n, producer.get()));
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), n, cudaMemcpyDeviceToDevice, producer.get()));
  copied.record(producer.get());
  copied.make_stream_wait(consumer.get());
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(host.data(), dst.data(), n, cudaMemcpyDeviceToHost, consumer.get()));
  consumer.synchronize();
  EXPECT_TRUE(copied.is_complete());
  EXPECT_GE(copied.elapsed_ms_since(start), 0.0f);
  const auto* bytes = static_cast<const unsigned char*>(host.data());
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(bytes[i], 0x5a) << i;
}

TEST_F(CudaTest, DeviceBuffersStopCallingCudaMallocInSteadyState) {
  CachingAllocator& allocator = device_caching_allocator(0);
  const std::vector<size_t> sizes = {1 << 10, 1 << 20, 96 << 20, 12345};
  for (int step = 0; step < 3; ++step) {
    std::vector<Buffer> buffers;
    for (size_t bytes : sizes) buffers.emplace_back(MemoryKind::kDevice, bytes);
  }
  const uint64_t raw_after_warmup = allocator.stats().raw_allocations;
  for (int step = 0; step < 10; ++step) {
    std::vector<Buffer> buffers;
    for (size_t bytes : sizes) buffers.emplace_back(MemoryKind::kDevice, bytes);
  }
  EXPECT_EQ(allocator.stats().raw_allocations, raw_after_warmup);
}

TEST_F(CudaTest, CudaErrorsCarryTheRuntimeText) {
  try {
    DTRAIN_CUDA_CHECK(cudaSetDevice(4096)) << "binding to a GPU that does not exist";
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaErrorInvalidDevice"), std::string::npos) << e.what();
  }
}

#else

TEST_F(CudaTest, StreamEventOrderingAndTiming) {}
TEST_F(CudaTest, DeviceBuffersStopCallingCudaMallocInSteadyState) {}
TEST_F(CudaTest, CudaErrorsCarryTheRuntimeText) {}

#endif

}  // namespace
}  // namespace dtrain::runtime
