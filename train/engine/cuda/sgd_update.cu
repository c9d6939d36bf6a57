#include <algorithm>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_elements.cuh"
#include "runtime/cuda/resident_grid.h"
#include "train/engine/cuda/sgd_update.h"

namespace dtrain::train::cuda {
namespace {

using runtime::cuda::DeviceTypeOf;
using runtime::cuda::load;

// The range of element i: the first whose end is past i (binary search; the table is a few hundred
// entries and stays in cache).
__device__ inline const DecayRangeEnd& range_of(uint64_t i, const DecayRangeEnd* ranges, int count) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (ranges[mid].end > i) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return ranges[lo];
}

template <typename G>
__global__ void sgd_kernel(SgdStep s, const G* __restrict__ grads) {
  __nv_bfloat16* copy = reinterpret_cast<__nv_bfloat16*>(s.params_bf16);
  const float lr = s.lr_on_device != nullptr ? *s.lr_on_device : s.lr;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < s.count; i += size_t{gridDim.x} * blockDim.x) {
    const DecayRangeEnd& range = range_of(i, s.ranges, s.range_count);
    const float p = s.params[i];
    if (range.lr_scale == 0.0f) {  // frozen: no update, no momentum; the bf16 copy still mirrors it
      if (copy != nullptr) copy[i] = __float2bfloat16_rn(p);
      continue;
    }
    // Written as the host loop writes it (no fused multiply-add), so both give the same floats.
    const float g = __fadd_rn(load(grads, i), __fmul_rn(range.weight_decay, p));
    const float buf = __fadd_rn(__fmul_rn(s.mu, s.momentum[i]), g);
    s.momentum[i] = buf;
    const float d = s.nesterov ? __fadd_rn(g, __fmul_rn(s.mu, buf)) : buf;
    const float updated = __fsub_rn(p, __fmul_rn(__fmul_rn(lr, range.lr_scale), d));
    s.params[i] = updated;
    if (copy != nullptr) copy[i] = __float2bfloat16_rn(updated);
  }
}

__global__ void set_lr_kernel(float* where, float lr) {
  *where = lr;
}

}  // namespace

void set_device_lr(cudaStream_t stream, float* where, float lr) {
  set_lr_kernel<<<1, 1, 0, stream>>>(where, lr);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "learning rate to the device";
}

template <typename G>
void sgd_update(cudaStream_t stream, const SgdStep& step, const G* grads) {
  DTRAIN_CHECK(step.range_count > 0 || step.count == 0) << "sgd_update: no decay ranges";
  if (step.count == 0) return;
  constexpr int kThreads = 256;
  const unsigned blocks = runtime::cuda::one_wave_grid(runtime::cuda::kernel_address(sgd_kernel<DeviceTypeOf<G>>),
                                                       kThreads, static_cast<int64_t>(step.count));
  sgd_kernel<<<blocks, kThreads, 0, stream>>>(step, reinterpret_cast<const DeviceTypeOf<G>*>(grads));
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "sgd update kernel";
}

template void sgd_update<float>(cudaStream_t, const SgdStep&, const float*);
template void sgd_update<runtime::bfloat16>(cudaStream_t, const SgdStep&, const runtime::bfloat16*);

}  // namespace dtrain::train::cuda
