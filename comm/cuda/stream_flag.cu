#include <cuda.h>  // the driver API's types only: its entry points come through the runtime

#include <atomic>
#include <chrono>
#include <thread>

#include "comm/cuda/stream_flag.cuh"
#include "runtime/base/env.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_check.h"

namespace dtrain::comm::cuda {
namespace {

using StreamValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

struct MemOps {
  StreamValue64 wait = nullptr;
  StreamValue64 write = nullptr;
};

// The driver's stream memory operations, looked up once through the runtime (so nothing links
// libcuda directly); empty when the driver or the current device does not offer them.
MemOps find_memops() {
  MemOps ops;
  int device = 0;
  int supported = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return ops;
  using GetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  void* get_attribute = nullptr;
  void* wait = nullptr;
  void* write = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", &get_attribute, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess ||
      reinterpret_cast<GetAttribute>(get_attribute)(&supported, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                                                    device) != CUDA_SUCCESS ||
      supported == 0) {
    return ops;
  }
  if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", &wait, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess ||
      cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &write, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return ops;
  }
  ops.wait = reinterpret_cast<StreamValue64>(wait);
  ops.write = reinterpret_cast<StreamValue64>(write);
  return ops;
}

bool kernels_requested() {
  const auto v = runtime::env_string("DTRAIN_STREAM_FLAG_KERNELS");
  if (!v || *v == "0") return false;
  DTRAIN_USAGE_CHECK(*v == "1") << "DTRAIN_STREAM_FLAG_KERNELS=" << *v
                                << ": use 1 (kernels) or 0 (stream memory operations)";
  return true;
}

const MemOps& memops() {
  static const MemOps ops = kernels_requested() ? MemOps{} : find_memops();
  return ops;
}

__global__ void wait_for_value(const volatile uint64_t* counter, uint64_t at_least) {
  while (*counter < at_least) __nanosleep(1000);
}

__global__ void store_value(volatile uint64_t* counter, uint64_t value) {
  // Stream order has completed the earlier copies; the fence orders this thread's view as well.
  __threadfence_system();
  *counter = value;
  __threadfence_system();
}

}  // namespace

StreamFlag::StreamFlag() {
  void* host = nullptr;
  DTRAIN_CUDA_CHECK(cudaHostAlloc(&host, sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable));
  host_ = static_cast<volatile uint64_t*>(host);
  *host_ = 0;
  void* device = nullptr;
  DTRAIN_CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
  device_ = static_cast<uint64_t*>(device);
  memops_ = memops().wait != nullptr;
  // Load both kernels now (cudaFuncGetAttributes loads what lazy module loading has not).
  cudaFuncAttributes attributes;
  DTRAIN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, wait_for_value));
  DTRAIN_CUDA_CHECK(cudaFuncGetAttributes(&attributes, store_value));
}

StreamFlag::~StreamFlag() {
  // Release any stream still waiting, so none is left held by a flag that no longer exists (a value
  // above every ticket, also for the memory operation's cyclic comparison).
  *host_ = uint64_t{1} << 62;
  cudaFreeHost(const_cast<uint64_t*>(host_));
}

namespace {

// One stream memory operation on the flag's device address; a failure names the call.
void enqueue_memop(StreamValue64 op, const char* name, cudaStream_t stream, uint64_t* address, uint64_t value,
                   unsigned flags) {
  const CUresult r = op(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(address), value, flags);
  DTRAIN_CHECK(r == CUDA_SUCCESS) << name << " failed (CUresult " << static_cast<int>(r)
                                  << "); DTRAIN_STREAM_FLAG_KERNELS=1 uses kernels instead";
}

}  // namespace

void StreamFlag::enqueue_wait(cudaStream_t stream, uint64_t at_least) {
  if (memops_) {
    // The default condition is a cyclic >=, which the growing tickets satisfy.
    enqueue_memop(memops().wait, "cuStreamWaitValue64", stream, device_, at_least, CU_STREAM_WAIT_VALUE_GEQ);
    return;
  }
  wait_for_value<<<1, 1, 0, stream>>>(device_, at_least);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "enqueuing a stream wait";
}

void StreamFlag::enqueue_set(cudaStream_t stream, uint64_t value) {
  if (memops_) {
    // Default flags: a memory barrier first, so the stream's earlier copies are visible before it.
    enqueue_memop(memops().write, "cuStreamWriteValue64", stream, device_, value, CU_STREAM_WRITE_VALUE_DEFAULT);
    return;
  }
  store_value<<<1, 1, 0, stream>>>(device_, value);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "enqueuing a stream signal";
}

uint64_t StreamFlag::value() const {
  const uint64_t v = *host_;
  std::atomic_thread_fence(std::memory_order_acquire);  // data the GPU wrote before the value
  return v;
}

void StreamFlag::set(uint64_t value) {
  std::atomic_thread_fence(std::memory_order_release);  // our writes before the GPU sees the value
  *host_ = value;
}

bool StreamFlag::wait_at_least(uint64_t at_least, const std::atomic<bool>* give_up) const {
  for (int round = 0; value() < at_least; ++round) {
    if (give_up != nullptr && give_up->load(std::memory_order_acquire)) return false;
    if (round < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(round < 1024 ? 20 : 200));
    }
  }
  return true;
}

}  // namespace dtrain::comm::cuda
