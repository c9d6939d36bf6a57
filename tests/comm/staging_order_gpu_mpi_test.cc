// Staged device calls (comm/host/device_staging.h): a stream never waits for a job that the
// communicator's worker does not have yet. Once the return stream holds a piece's wait for the host
// to reduce it, only the worker can release it; if the enqueuing thread then blocked in a CUDA call
// (behind another thread that holds the context while the device drains: a kernel's first launch
// under lazy module loading, cudaFree) before handing the call over, the drain would wait for the
// return stream, the stream for the worker and the worker for the call: the hang of a ResNet-50
// job with DTRAIN_FUSION_THRESHOLD=4194304 on the hierarchical backend, where one rank's worker sat
// idle while its cross-node peer waited in the ring.
//
// Here the call's trace (call_trace.h) is told on the enqueuing thread right before a piece's copy
// back is enqueued, after that piece's wait went onto the return stream, and waits there for the
// return stream to drain (up to a limit), as such a drain would. The results are checked against a
// float64 reference. Skips, saying why, without a CUDA build or a GPU (ranks may share one).
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/backends/mpi_ring_communicator.h"
#include "comm/call_trace.h"
#include "runtime/memory/buffer.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_context.h"
#include "tests/comm/collective_reference.h"
#include "tests/support/mpi_world.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"
#endif

namespace dtrain::comm {
namespace {

using test::world_size;

// Collective: every rank reaches the same verdict, so no rank skips alone.
std::string why_no_gpu_run() {
#if !DTRAIN_WITH_CUDA
  return "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
#else
  int gpus = static_cast<int>(runtime::detail::runtime_visible_gpus().size());
  MPI_Allreduce(MPI_IN_PLACE, &gpus, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return gpus == 0 ? "no GPU visible" : "";
#endif
}

#if DTRAIN_WITH_CUDA

// Before each piece's copy back is enqueued: polls the return stream until it has run everything
// queued on it (the piece's wait included) or `limit` passes, and counts the pieces where it did not.
class DrainBeforeCopyBack final : public CallTrace {
 public:
  explicit DrainBeforeCopyBack(std::chrono::seconds limit) : limit_(limit) {}
  void host_phase(const CallPhase&) override {}  // the worker's; nothing to do
  void device_phase(const CallPhase& phase, void* stream, bool after) override {
    if (after || std::string(phase.name) != kPhaseHostToDevice) return;
    ++pieces_;
    if (stuck_ > 0) return;  // one wait out is enough to fail, and keeps a failing run short
    const auto deadline = std::chrono::steady_clock::now() + limit_;
    const auto s = static_cast<cudaStream_t>(stream);
    for (;;) {
      const cudaError_t status = cudaStreamQuery(s);
      if (status == cudaSuccess) return;
      DTRAIN_CHECK(status == cudaErrorNotReady) << "cudaStreamQuery: " << cudaGetErrorString(status);
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ++stuck_;
  }
  int pieces() const { return pieces_; }
  int stuck() const { return stuck_; }

 private:
  std::chrono::seconds limit_;
  int pieces_ = 0;
  int stuck_ = 0;
};

TEST(StagingOrder, ReturnStreamNeverWaitsForACallTheWorkerLacks) {
  if (const std::string why = why_no_gpu_run(); !why.empty()) GTEST_SKIP() << why;
  // 1 MiB pieces: the larger count runs several pieces through the four pinned slots.
  setenv("DTRAIN_STAGING_PIECE_BYTES", "1048576", 1);
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "stage", 1);
  runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{});
  runtime::bind_gpu(ctx, /*allow_sharing=*/true);
  MpiRingCommunicator comm(ctx.world(), RingTuning{});
  int device = 0;
  DTRAIN_CUDA_CHECK(cudaGetDevice(&device));
  runtime::CudaStream stream(device);
  const int rank = test::world_rank();
  const int size = world_size();
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  for (size_t count : {size_t{1}, size_t{7919}, (size_t{1} << 20) + 3}) {
    std::vector<double> exact(count, 0.0), magnitude(count, 0.0);
    std::vector<unsigned char> mine;
    for (int r = 0; r < size; ++r) {
      const std::vector<double> v = test::random_values(seed, r, static_cast<int>(count), count, DType::kF32);
      for (size_t i = 0; i < count; ++i) {
        exact[i] += v[i];
        magnitude[i] += std::fabs(v[i]);
      }
      if (r == rank) mine = test::encode(v, DType::kF32);
    }
    runtime::Buffer data(runtime::MemoryKind::kDevice, count * sizeof(float), stream.get());
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(data.data(), mine.data(), mine.size(), cudaMemcpyDefault, stream.get()));
    DrainBeforeCopyBack trace(std::chrono::seconds(10));
    Collective call;
    call.send = call.recv = data.data();
    call.count = count;
    call.where = Location::gpu(stream.get());
    call.trace = &trace;
    Work work = comm.submit(call);
    runtime::Buffer got(runtime::MemoryKind::kPinnedHost, count * sizeof(float));
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(got.data(), data.data(), got.bytes(), cudaMemcpyDefault, stream.get()));
    stream.synchronize();
    work.wait();
    EXPECT_GT(trace.pieces(), 0) << "the staged path reported no copy back";
    EXPECT_EQ(trace.stuck(), 0) << "count " << count << ": the return stream waited for the worker, which had not "
                                << "been handed the call (" << trace.stuck() << " of " << trace.pieces() << " pieces)";
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      const double value = test::decode_one(static_cast<const unsigned char*>(got.data()), i, DType::kF32);
      if (!(std::fabs(value - exact[i]) <= test::tolerance(exact[i], magnitude[i], DType::kF32))) ++wrong;
    }
    EXPECT_EQ(wrong, 0u) << "count " << count << " seed " << seed;
  }
}

#else

TEST(StagingOrder, Skipped) {
  GTEST_SKIP() << why_no_gpu_run();
}

#endif

}  // namespace
}  // namespace dtrain::comm
