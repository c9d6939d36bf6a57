#include "comm/backends/cuda/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include "comm/diagnostics/consistency_check.h"
#include "comm/host/memory_ops.h"
#include "comm/host/wide_reduction.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/mpi/mpi_check.h"

namespace dtrain::comm {
namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return ncclFloat32;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    default: DTRAIN_FAIL() << "no NCCL type for " << runtime::dtype_name(dtype);
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  return op == ReduceOp::kAverage ? ncclAvg : ncclSum;
}

cudaStream_t stream_of(const Collective& call) {
  return static_cast<cudaStream_t>(call.where.stream);
}

// On one rank every reduction (sum or average, any dtype) is its input: copied here instead of
// calling NCCL, whose one-rank reduction kernel before 2.29.7 leaves the last count % 32 elements
// of an out-of-place ncclAvg unwritten (NVIDIA/nccl#1950; seen with 2.28.9 on an H200).
bool copied_on_one_rank(int size, const Collective& call) {
  if (size != 1) return false;
  copy_bytes(call.recv, call.send, call.count * runtime::dtype_size(call.dtype), call.where);
  return true;
}

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm comm, SixteenBitSum sum16)
    : control_(runtime::MpiComm::duplicate(comm)), sum16_(sum16) {
  rank_ = control_.rank();
  size_ = control_.size();
  // Ranks that disagree would call different NCCL collectives (all-reduce against reduce-scatter
  // and all-gather) and wait for each other forever.
  check_same_setting(control_.get(), "the 16-bit sum (--sixteen-bit-sum)", static_cast<uint64_t>(sum16),
                     [](uint64_t v) { return std::string(sixteen_bit_sum_name(static_cast<SixteenBitSum>(v))); });
  ncclUniqueId id;
  if (rank_ == 0) DTRAIN_NCCL_CHECK(ncclGetUniqueId(&id));
  DTRAIN_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, control_.get())) << "broadcasting the NCCL unique id";
  DTRAIN_NCCL_CHECK(ncclCommInitRank(&nccl_, size_, id, rank_)) << "creating an NCCL communicator of " << size_;
  stall_.set_async_error_poll("nccl", [this] { return poll_async_error(); });
}

NcclCommunicator::~NcclCommunicator() {
  std::lock_guard lock(nccl_mutex_);
  if (nccl_ == nullptr) return;
  if (!aborted_) ncclCommDestroy(nccl_);
  nccl_ = nullptr;
}

std::string NcclCommunicator::poll_async_error() {
  std::lock_guard lock(nccl_mutex_);
  if (nccl_ == nullptr || aborted_) return "";
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(nccl_, &async) != ncclSuccess) return "";
  if (async == ncclSuccess || async == ncclInProgress) return "";
  ncclCommAbort(nccl_);  // ends its kernels, so streams waiting on them are released
  aborted_ = true;
  return runtime::nccl_error_text(async) + " (ncclCommGetAsyncError; communicator aborted)";
}

void NcclCommunicator::checked(ncclResult_t result, const char* what) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  const std::string text = runtime::nccl_error_text(result);
  {
    std::lock_guard lock(nccl_mutex_);
    if (!aborted_) {
      ncclCommAbort(nccl_);  // wake peers blocked in this communicator
      aborted_ = true;
    }
  }
  throw runtime::NcclError(runtime::ErrorKind::kNccl, what, text, "communicator aborted", __FILE__, __LINE__);
}

Work NcclCommunicator::submit(const Collective& call) {
  validate_call(call, size_);
  DTRAIN_USAGE_CHECK(aborted_ == false) << describe(call) << ": this NCCL communicator was aborted after an error";
  DTRAIN_USAGE_CHECK(call.where.device || call.kind == CollectiveKind::kBarrier)
      << describe(call) << ": the nccl backend takes device buffers (Location::gpu(stream))";
  if (check_) {
    StallChannel::Operation watched(stall_, name(), call);
    check_same_collective(control_.get(), call);
  }
  const cudaStream_t stream = stream_of(call);
  const ncclDataType_t type = nccl_type(call.dtype);
  switch (call.kind) {
    case CollectiveKind::kAllReduce: all_reduce(call); break;
    case CollectiveKind::kReduceScatter: reduce_scatter(call); break;
    case CollectiveKind::kBroadcast:
      checked(ncclBroadcast(call.recv, call.recv, call.count, type, call.root, nccl_, stream), "ncclBroadcast");
      break;
    case CollectiveKind::kAllGather:
      checked(ncclAllGather(call.send, call.recv, call.count, type, nccl_, stream), "ncclAllGather");
      break;
    case CollectiveKind::kBarrier: {
      StallChannel::Operation watched(stall_, name(), call);
      DTRAIN_MPI_CHECK(MPI_Barrier(control_.get()));
      break;
    }
  }
  return Work();
}

void NcclCommunicator::all_reduce(const Collective& call) {
  if (copied_on_one_rank(size_, call)) return;
  const cudaStream_t stream = stream_of(call);
  if (call.dtype == DType::kF32 || call.count == 0 || sum16_ == SixteenBitSum::kNative) {
    checked(ncclAllReduce(call.send, call.recv, call.count, nccl_type(call.dtype), nccl_op(call.op), nccl_, stream),
            "ncclAllReduce");
    return;
  }
  // 16-bit: fp32 reduce-scatter over a padded buffer, one rounding, 16-bit all-gather.
  const size_t n = static_cast<size_t>(size_);
  const size_t shard = (call.count + n - 1) / n;
  const size_t esize = runtime::dtype_size(call.dtype);
  runtime::Buffer gathered;  // the 16-bit result when the padding does not fit in call.recv
  unsigned char* out = nullptr;
  reduce_widened({call.send, call.dtype, call.count, shard * n, 1.0f, call.where, nullptr}, [&](float* wide) {
    float* my_shard = wide + static_cast<size_t>(rank_) * shard;
    checked(ncclReduceScatter(wide, my_shard, shard, ncclFloat32, nccl_op(call.op), nccl_, stream),
            "ncclReduceScatter");
    if (shard * n != call.count) gathered = scratch_buffer(shard * n * esize, call.where);
    out = static_cast<unsigned char*>(gathered.data() != nullptr ? gathered.data() : call.recv);
    return Rounding{my_shard, out + static_cast<size_t>(rank_) * shard * esize, shard};
  });
  checked(
      ncclAllGather(out + static_cast<size_t>(rank_) * shard * esize, out, shard, nccl_type(call.dtype), nccl_, stream),
      "ncclAllGather");
  if (gathered.data() != nullptr) copy_bytes(call.recv, out, call.count * esize, call.where);
}

void NcclCommunicator::reduce_scatter(const Collective& call) {
  if (copied_on_one_rank(size_, call)) return;
  const cudaStream_t stream = stream_of(call);
  if (call.dtype == DType::kF32 || sum16_ == SixteenBitSum::kNative) {
    checked(ncclReduceScatter(call.send, call.recv, call.count, nccl_type(call.dtype), nccl_op(call.op), nccl_, stream),
            "ncclReduceScatter");
    return;
  }
  const size_t total = call.count * static_cast<size_t>(size_);
  reduce_widened({call.send, call.dtype, total, total, 1.0f, call.where, nullptr}, [&](float* wide) {
    float* my_block = wide + static_cast<size_t>(rank_) * call.count;
    checked(ncclReduceScatter(wide, my_block, call.count, ncclFloat32, nccl_op(call.op), nccl_, stream),
            "ncclReduceScatter");
    return Rounding{my_block, call.recv, call.count};
  });
}

}  // namespace dtrain::comm
