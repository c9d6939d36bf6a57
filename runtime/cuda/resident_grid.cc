#include "runtime/cuda/resident_grid.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "runtime/cuda/cuda_check.h"

namespace dtrain::runtime::cuda {

int resident_blocks(const void* kernel, int threads) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, int>, int> cache;  // (kernel, device, threads) -> blocks
  int device = 0;
  DTRAIN_CUDA_CHECK(cudaGetDevice(&device)) << "resident_blocks: the current device";
  const std::tuple<const void*, int, int> key{kernel, device, threads};
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto found = cache.find(key);
    if (found != cache.end()) return found->second;
  }
  int per_sm = 0, sms = 0;
  DTRAIN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0))
      << "resident_blocks: occupancy of a kernel at " << threads << " threads per block";
  DTRAIN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device))
      << "resident_blocks: the SM count of GPU " << device;
  const int blocks = std::max(1, per_sm * sms);
  std::lock_guard<std::mutex> lock(mutex);
  cache.emplace(key, blocks);
  return blocks;
}

unsigned one_wave_grid(const void* kernel, int threads, int64_t work_items) {
  const int64_t wanted = std::max<int64_t>(1, (work_items + threads - 1) / threads);
  return static_cast<unsigned>(std::min<int64_t>(wanted, resident_blocks(kernel, threads)));
}

}  // namespace dtrain::runtime::cuda
