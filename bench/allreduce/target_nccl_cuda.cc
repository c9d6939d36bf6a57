// The raw NCCL peer (ncclAllReduce called directly, as nccl-tests does) and device helpers.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "bench/allreduce/target.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::bench {
namespace {

ncclDataType_t nccl_type(comm::DType dtype) {
  if (dtype == comm::DType::kF16) return ncclFloat16;
  if (dtype == comm::DType::kBF16) return ncclBfloat16;
  return ncclFloat32;
}

class RawNcclTarget final : public AllReduceTarget {
 public:
  explicit RawNcclTarget(MPI_Comm world) {
    int rank = 0, size = 0;
    DTRAIN_MPI_CHECK(MPI_Comm_rank(world, &rank));
    DTRAIN_MPI_CHECK(MPI_Comm_size(world, &size));
    ncclUniqueId id;
    if (rank == 0) DTRAIN_NCCL_CHECK(ncclGetUniqueId(&id));
    DTRAIN_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, world));
    DTRAIN_NCCL_CHECK(ncclCommInitRank(&comm_, size, id, rank));
    DTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~RawNcclTarget() override {
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }
  std::string name() const override { return "raw-nccl"; }
  bool device_buffers() const override { return true; }
  void* stream() const override { return stream_; }
  void run(const void* send, void* recv, size_t count, comm::DType dtype, comm::ReduceOp op) override {
    DTRAIN_NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(dtype), op == comm::ReduceOp::kSum ? ncclSum : ncclAvg,
                                    comm_, stream_));
  }
  void synchronize() override { DTRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<AllReduceTarget> make_raw_nccl_target(const runtime::RankContext& ctx) {
  return std::make_unique<RawNcclTarget>(ctx.world());
}

void* make_bench_stream() {
  cudaStream_t stream = nullptr;
  DTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;  // lives as long as the benchmark process
}

// The waiting thread sleeps instead of spinning (cudaEventBlockingSync): mpirun binds a rank to one
// core, and a spinning wait would take it from the communicator's worker thread, which the staged
// paths need to make progress.
void synchronize_stream(void* stream) {
  cudaEvent_t done = nullptr;
  DTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventBlockingSync | cudaEventDisableTiming));
  DTRAIN_CUDA_CHECK(cudaEventRecord(done, static_cast<cudaStream_t>(stream)));
  const cudaError_t status = cudaEventSynchronize(done);
  cudaEventDestroy(done);
  DTRAIN_CUDA_CHECK(status);
}

void* device_alloc(size_t bytes) {
  void* ptr = nullptr;
  DTRAIN_CUDA_CHECK(cudaMalloc(&ptr, bytes)) << "benchmark buffer of " << bytes << " bytes";
  return ptr;
}
void device_free(void* ptr) {
  cudaFree(ptr);
}
void copy_to_device(void* dst, const void* src, size_t bytes) {
  DTRAIN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the DMA lands, and the benchmark's stream
  // is non-blocking: wait, or the next all-reduce can read half-written input.
  DTRAIN_CUDA_CHECK(cudaDeviceSynchronize());
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
  DTRAIN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace dtrain::bench
