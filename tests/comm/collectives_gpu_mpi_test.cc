// Collectives on device buffers: nccl, hierarchical (NCCL inside the node, our ring across
// simulated nodes), the staged and direct mpi-ring paths (also with a bf16 wire), against a float64 reference. Runs
// under mpirun with 1 to 4 ranks; skips, saying why, without a CUDA build, without GPUs, or with more ranks than GPUs
// (NCCL needs one GPU per rank).
#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <algorithm>
#include <memory>
#include <string>

#include "comm/backends/factory.h"
#include "comm/backends/hierarchical_communicator.h"
#include "comm/backends/mpi_ring_communicator.h"
#include "runtime/io/fingerprint.h"
#include "runtime/memory/buffer.h"
#include "runtime/mpi/mpi_agreement.h"
#include "runtime/rank/gpu_binding.h"
#include "runtime/rank/rank_context.h"
#include "tests/comm/collective_reference.h"

#if DTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/stream.h"
#endif

#include "tests/support/mpi_world.h"

namespace dtrain::comm {
namespace {

using test::world_rank;
using test::world_size;

// Collective: every rank reaches the same verdict, so no rank skips alone.
std::string why_no_gpu_run() {
#if !DTRAIN_WITH_CUDA
  return "built without CUDA (DTRAIN_CUDA=OFF or toolkit not found)";
#else
  int gpus = static_cast<int>(runtime::detail::runtime_visible_gpus().size());
  MPI_Allreduce(MPI_IN_PLACE, &gpus, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (gpus == 0) return "no GPU visible";
  if (gpus < world_size()) {
    return std::to_string(world_size()) + " ranks but " + std::to_string(gpus) + " GPUs; NCCL needs one GPU per rank";
  }
  return "";
#endif
}

#if DTRAIN_WITH_CUDA

struct DeviceRun {
  std::unique_ptr<runtime::RankContext> ctx;
  std::unique_ptr<Communicator> comm;
};

// Device memory for a test's buffers: managed for the direct path under an MPI without CUDA
// support (mpi-ring-direct), which reaches it through page migration; plain device memory otherwise.
class DeviceBytes {
 public:
  DeviceBytes(size_t bytes, bool managed) {
    if (managed) {
      DTRAIN_CUDA_CHECK(cudaMallocManaged(&data_, std::max<size_t>(bytes, 1)));
    } else {
      DTRAIN_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(bytes, 1)));
    }
  }
  ~DeviceBytes() { cudaFree(data_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

bool direct(const std::string& backend) {
  return backend.rfind("mpi-ring-direct", 0) == 0;
}

// mpi-ring with a bf16 cross-node wire (mpi_ring_communicator.h): fp32 all-reduces narrowed on the
// device before staging (or before MPI, direct).
bool bf16_wire(const std::string& backend) {
  return backend.size() > 10 && backend.compare(backend.size() - 10, 10, "-bf16-wire") == 0;
}

// The error a result may carry. Every backend adds 16-bit values in fp32 and rounds once, except
// nccl-native (SixteenBitSum::kNative), which rounds at each step of NCCL's algorithm: at most one
// rounding per rank after the first (and one for the average's 1/n), each at most half a unit in
// the last place of a partial sum no larger than the sum of |terms|.
double bound_for(const std::string& backend, double want, double magnitude, DType dtype, int ranks) {
  const double one_rounding = test::tolerance(want, magnitude, dtype);
  // The wire: each rank's value and each hop's partial sum rounded to bf16 (2^-8 relative of a
  // partial sum no larger than the sum of |terms|), on top of fp32's own rounding.
  if (bf16_wire(backend)) return one_rounding + ranks * std::ldexp(magnitude, -8);
  if (backend != "nccl-native" || dtype == DType::kF32) return one_rounding;
  const int mantissa_bits = dtype == DType::kBF16 ? 7 : 10;
  return one_rounding + ranks * std::ldexp(magnitude, -(mantissa_bits + 1));
}

DeviceRun make(const std::string& backend, int ranks_per_node) {
  // Small staging pieces, so the larger counts below run many pieces through the reused pinned
  // slots of mpi-ring's and hierarchical's staging (more pieces than slots), the small ones one.
  setenv("DTRAIN_STAGING_PIECE_BYTES", "1048576", 1);
  DeviceRun run;
  run.ctx = std::make_unique<runtime::RankContext>(
      MPI_COMM_WORLD, ranks_per_node > 0 ? runtime::NodeLayout{ranks_per_node, true} : runtime::NodeLayout{});
  runtime::bind_gpu(*run.ctx, false);
  RingTuning tuning;
  tuning.segment_bytes = 64 * 1024;
  if (backend == "nccl") run.comm = make_nccl_communicator(run.ctx->world());
  if (backend == "nccl-native") run.comm = make_nccl_communicator(run.ctx->world(), SixteenBitSum::kNative);
  // mpi-ring either way, whatever this MPI reports: staged, or device pointers straight to MPI.
  setenv("DTRAIN_MPI_DEVICE_POINTERS", direct(backend) ? "direct-managed" : "stage", 1);
  if (backend == "mpi-ring" || backend == "mpi-ring-direct")
    run.comm = std::make_unique<MpiRingCommunicator>(run.ctx->world(), tuning);
  if (bf16_wire(backend)) {
    run.comm = std::make_unique<MpiRingCommunicator>(run.ctx->world(), tuning,
                                                     MpiRingCommunicator::Sixteen::kOneRounding, DType::kBF16);
  }
  if (backend == "hierarchical") run.comm = std::make_unique<HierarchicalCommunicator>(*run.ctx, true, tuning);
  return run;
}

using Param = std::tuple<std::string, int, DType, bool>;  // backend, ranks per node, dtype, in place

class DeviceCollectives : public testing::TestWithParam<Param> {};

TEST_P(DeviceCollectives, AllReduceMatchesFloat64) {
  if (const std::string why = why_no_gpu_run(); !why.empty()) GTEST_SKIP() << why;
  const auto [backend, rpn, dtype, in_place] = GetParam();
  DeviceRun run = make(backend, rpn);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int size = world_size();
  const uint64_t seed = test::shared_seed(MPI_COMM_WORLD);
  int device = 0;
  DTRAIN_CUDA_CHECK(cudaGetDevice(&device));
  runtime::CudaStream stream(device);
  const size_t esize = runtime::dtype_size(dtype);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, static_cast<size_t>(size - 1), size_t{7919}, size_t{1000003},
                         (size_t{1} << 20) + 3}) {
      std::vector<double> exact(count, 0.0), magnitude(count, 0.0);
      std::vector<unsigned char> mine;
      for (int r = 0; r < size; ++r) {
        const std::vector<double> v = test::random_values(seed, r, static_cast<int>(count), count, dtype);
        for (size_t i = 0; i < count; ++i) {
          exact[i] += v[i];
          magnitude[i] += std::fabs(v[i]);
        }
        if (r == rank) mine = test::encode(v, dtype);
      }
      DeviceBytes send(count * esize + 1, direct(backend));
      DeviceBytes recv(count * esize + 1, direct(backend));
      // Async on the stream: a pageable cudaMemcpy may return before the data lands, and the stream
      // does not wait for the legacy default stream.
      DTRAIN_CUDA_CHECK(cudaMemcpyAsync(in_place ? recv.data() : send.data(), mine.data(), count * esize,
                                        cudaMemcpyDefault, stream.get()));
      DTRAIN_CUDA_CHECK(
          cudaMemsetAsync(static_cast<unsigned char*>(recv.data()) + count * esize, 0xEE, 1, stream.get()));
      // Queue work before and after on the same stream: the collective must be ordered between them.
      Work work = run.comm->all_reduce(in_place ? recv.data() : send.data(), recv.data(), count, dtype, op,
                                       Location::gpu(stream.get()));
      // Pinned, so the copy is truly asynchronous and ordered only by the stream.
      runtime::Buffer pinned(runtime::MemoryKind::kPinnedHost, count * esize + 1);
      DTRAIN_CUDA_CHECK(cudaMemcpyAsync(pinned.data(), recv.data(), pinned.bytes(), cudaMemcpyDefault, stream.get()));
      stream.synchronize();
      work.wait();
      const auto* bytes = static_cast<const unsigned char*>(pinned.data());
      const std::vector<unsigned char> got(bytes, bytes + pinned.bytes());
      const double scale = op == ReduceOp::kAverage ? 1.0 / size : 1.0;
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) {
        const double want = exact[i] * scale;
        if (!(std::fabs(test::decode_one(got.data(), i, dtype) - want) <=
              bound_for(backend, want, magnitude[i] * scale, dtype, size))) {
          ++wrong;
        }
      }
      EXPECT_EQ(wrong, 0u) << backend << " rpn=" << rpn << " " << runtime::dtype_name(dtype) << " count=" << count
                           << (op == ReduceOp::kSum ? " sum" : " avg") << " seed " << seed;
      EXPECT_EQ(got.back(), 0xEE) << "wrote past the end";
      EXPECT_TRUE(runtime::same_on_every_rank(MPI_COMM_WORLD, runtime::fingerprint(got.data(), count * esize)));
    }
  }
}

TEST_P(DeviceCollectives, BroadcastAllGatherReduceScatter) {
  if (const std::string why = why_no_gpu_run(); !why.empty()) GTEST_SKIP() << why;
  const auto [backend, rpn, dtype, in_place] = GetParam();
  if (in_place) GTEST_SKIP() << "placement covered by the all-reduce test";
  DeviceRun run = make(backend, rpn);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const size_t n = static_cast<size_t>(world_size());
  int device = 0;
  DTRAIN_CUDA_CHECK(cudaGetDevice(&device));
  runtime::CudaStream stream(device);
  const size_t esize = runtime::dtype_size(dtype);
  const size_t count = 4099;
  std::vector<unsigned char> all;
  for (size_t r = 0; r < n; ++r) {
    auto block = test::encode(test::random_values(11, static_cast<int>(r), 3, count, dtype), dtype);
    all.insert(all.end(), block.begin(), block.end());
  }
  DeviceBytes a(all.size(), direct(backend));
  DeviceBytes b(all.size(), direct(backend));
  std::vector<unsigned char> got(all.size());
  // all_gather
  DTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(a.data(), all.data() + rank * count * esize, count * esize, cudaMemcpyDefault, stream.get()));
  run.comm->all_gather(a.data(), b.data(), count, dtype, Location::gpu(stream.get())).wait();
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(got.data(), b.data(), all.size(), cudaMemcpyDefault, stream.get()));
  stream.synchronize();
  EXPECT_EQ(got, all) << backend << " all_gather";
  // broadcast from the last rank
  const int root = static_cast<int>(n) - 1;
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(a.data(), rank == root ? all.data() : all.data() + 1, count * esize,
                                    cudaMemcpyDefault, stream.get()));
  run.comm->broadcast(a.data(), count, dtype, root, Location::gpu(stream.get())).wait();
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(got.data(), a.data(), count * esize, cudaMemcpyDefault, stream.get()));
  stream.synchronize();
  EXPECT_EQ(std::vector<unsigned char>(got.begin(), got.begin() + static_cast<long>(count * esize)),
            std::vector<unsigned char>(all.begin(), all.begin() + static_cast<long>(count * esize)))
      << backend << " broadcast";
  // reduce_scatter: every rank contributes `all`; rank r gets n x block r.
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(a.data(), all.data(), all.size(), cudaMemcpyDefault, stream.get()));
  run.comm->reduce_scatter(a.data(), b.data(), count, dtype, ReduceOp::kSum, Location::gpu(stream.get())).wait();
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(got.data(), b.data(), count * esize, cudaMemcpyDefault, stream.get()));
  stream.synchronize();
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const double want = n * test::decode_one(all.data() + rank * count * esize, i, dtype);
    if (!(std::fabs(test::decode_one(got.data(), i, dtype) - want) <=
          bound_for(backend, want, std::fabs(want), dtype, static_cast<int>(n))))
      ++wrong;
  }
  EXPECT_EQ(wrong, 0u) << backend << " reduce_scatter";
}

std::string name_of(const testing::TestParamInfo<Param>& info) {
  std::string name =
      std::get<0>(info.param) + (std::get<1>(info.param) ? "_rpn" + std::to_string(std::get<1>(info.param)) : "") +
      "_" + runtime::dtype_name(std::get<2>(info.param)) + (std::get<3>(info.param) ? "_inplace" : "_outofplace");
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Gpu, DeviceCollectives,
    testing::Combine(testing::Values("nccl", "nccl-native", "mpi-ring", "mpi-ring-direct", "hierarchical"),
                     testing::Values(0), testing::Values(DType::kF32, DType::kF16, DType::kBF16), testing::Bool()),
    name_of);
INSTANTIATE_TEST_SUITE_P(GpuBf16Wire, DeviceCollectives,
                         testing::Combine(testing::Values("mpi-ring-bf16-wire", "mpi-ring-direct-bf16-wire"),
                                          testing::Values(0), testing::Values(DType::kF32), testing::Bool()),
                         name_of);
INSTANTIATE_TEST_SUITE_P(GpuSimulatedNodes, DeviceCollectives,
                         testing::Combine(testing::Values("hierarchical"), testing::Values(1, 2),
                                          testing::Values(DType::kF32, DType::kBF16), testing::Bool()),
                         name_of);

// The hierarchical backend's own device scratch is not managed memory: in direct-managed mode a
// device call is refused with an error naming the variable, on every rank, instead of MPI crashing.
TEST(DeviceCollectivesBadInput, HierarchicalRefusesDirectManagedOnDeviceBuffers) {
  if (const std::string why = why_no_gpu_run(); !why.empty()) GTEST_SKIP() << why;
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "direct-managed", 1);
  runtime::RankContext ctx(MPI_COMM_WORLD, runtime::NodeLayout{1, true});
  runtime::bind_gpu(ctx, false);
  HierarchicalCommunicator comm(ctx, true, RingTuning{});
  setenv("DTRAIN_MPI_DEVICE_POINTERS", "stage", 1);
  DeviceBytes data(7919 * sizeof(float), true);
  Collective call;
  call.send = call.recv = data.data();
  call.count = 7919;
  call.where = Location::gpu(nullptr);
  try {
    comm.submit(call).wait();
    FAIL() << "a device all-reduce in direct-managed mode was not refused";
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("DTRAIN_MPI_DEVICE_POINTERS=direct-managed"), std::string::npos) << e.what();
  }
}

#else

TEST(DeviceCollectives, Skipped) {
  GTEST_SKIP() << why_no_gpu_run();
}

#endif

}  // namespace
}  // namespace dtrain::comm
