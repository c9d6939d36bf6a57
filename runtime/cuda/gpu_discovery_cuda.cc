// GPU discovery through the CUDA runtime, which applies CUDA_VISIBLE_DEVICES.
#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/rank/gpu_binding.h"

namespace dtrain::runtime::detail {

std::vector<GpuDevice> runtime_visible_gpus() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
    cudaGetLastError();  // a CPU-only host: not an error, the run goes to CPU mode
    return {};
  }
  DTRAIN_CUDA_CHECK(status) << "while listing GPUs";
  std::vector<GpuDevice> gpus;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    DTRAIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
    char bus_id[32] = {};
    DTRAIN_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), i));
    gpus.push_back(GpuDevice{i, prop.name, bus_id, prop.totalGlobalMem, false});
  }
  return gpus;
}

void set_current_device(int device) {
  DTRAIN_CUDA_CHECK(cudaSetDevice(device)) << "binding to GPU " << device;
}

}  // namespace dtrain::runtime::detail
