// StepGraphs (train/engine/cuda/step_graph.h) capturing work that allocates: the first capture of
// a step finds the graph pool empty, so the caching allocator asks cudaMalloc for memory in the
// middle of a thread-local capture. That must neither fail the capture nor be recorded in the
// graph: the buffer is kept by the pool, and a replay writes it. The allocation is larger than
// anything a test leaves cached, so it cannot be served from the cache instead.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/rank/gpu_binding.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"
#include "runtime/memory/buffer.h"
#include "train/engine/cuda/step_graph.h"
#endif

namespace dtrain::train {
namespace {

#if DTRAIN_WITH_CUDA
TEST(StepGraphsGpu, ACaptureThatAllocatesFreshMemoryReplays) {
  if (runtime::detail::runtime_visible_gpus().empty()) GTEST_SKIP() << "no GPU visible to the CUDA runtime";
  DTRAIN_CUDA_CHECK(cudaSetDevice(0));
  runtime::CudaStream stream(0);
  const size_t bytes = (size_t{1} << 30) + 7 * 4096;  // 1 GiB and a bit: no cached block fits
  runtime::Buffer out;
  {
    cuda::StepGraphs graphs(0, stream.get());
    const std::string why = graphs.capture(0, [&] {
      out = runtime::Buffer(runtime::MemoryKind::kDevice, bytes, stream.get());
      DTRAIN_CUDA_CHECK(cudaMemsetAsync(out.data(), 0x5a, bytes, stream.get()));
    });
    ASSERT_EQ(why, "") << "the capture failed";
    ASSERT_TRUE(graphs.has(0));
    // The capture recorded the memset without running it; the replay runs it.
    DTRAIN_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, bytes, stream.get()));
    for (size_t i = 0; i < graphs.segments(0); ++i) graphs.launch(0, i);
    std::vector<unsigned char> head(4096), tail(4096);
    auto* base = static_cast<unsigned char*>(out.data());
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(head.data(), base, head.size(), cudaMemcpyDeviceToHost, stream.get()));
    DTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(tail.data(), base + bytes - tail.size(), tail.size(), cudaMemcpyDeviceToHost, stream.get()));
    DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    for (size_t i = 0; i < head.size(); ++i) {
      ASSERT_EQ(head[i], 0x5a) << "byte " << i;
      ASSERT_EQ(tail[i], 0x5a) << "byte " << bytes - tail.size() + i;
    }
    out = runtime::Buffer();  // back to the pool before the graphs give the pool back
  }
}
#else
TEST(StepGraphsGpu, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
}
#endif

}  // namespace
}  // namespace dtrain::train
