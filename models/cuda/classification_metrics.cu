#include "models/cuda/classification_metrics.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_elements.cuh"
#include "runtime/memory/buffer.h"

namespace dtrain::models::cuda {
namespace {

using runtime::cuda::DeviceTypeOf;
using runtime::cuda::load;

constexpr int kThreads = 256;

struct RowResult {
  double loss;
  int top1, top5;
};

// Sum (or max) over the block; every thread gets the result.
template <typename V, bool kMax>
__device__ V block_combine(V v, V* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const V other = shared[threadIdx.x + stride];
      shared[threadIdx.x] =
          kMax ? (other > shared[threadIdx.x] ? other : shared[threadIdx.x]) : shared[threadIdx.x] + other;
    }
    __syncthreads();
  }
  const V result = shared[0];
  __syncthreads();
  return result;
}

// One block per row.
template <typename T>
__global__ void row_metrics_kernel(int classes, const T* __restrict__ logits, const int32_t* __restrict__ labels,
                                   RowResult* __restrict__ out) {
  __shared__ float shared_f[kThreads];
  __shared__ int shared_i[kThreads];
  const int row = blockIdx.x;
  const T* z = logits + int64_t{row} * classes;
  const int label = labels[row];
  const bool valid = label >= 0 && label < classes;
  const float target = valid ? load(z, label) : 0.0f;
  float local_max = -INFINITY;
  int better = 0, not_finite = 0;
  for (int j = threadIdx.x; j < classes; j += blockDim.x) {
    const float v = load(z, j);
    local_max = fmaxf(local_max, v);
    better += v > target ? 1 : 0;
    not_finite |= isfinite(v) ? 0 : 1;
  }
  const float row_max = block_combine<float, true>(local_max, shared_f);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < classes; j += blockDim.x) local_sum += expf(load(z, j) - row_max);
  const float sum_exp = block_combine<float, false>(local_sum, shared_f);
  const int total_better = block_combine<int, false>(better, shared_i);
  const int any_not_finite = block_combine<int, false>(not_finite, shared_i);
  if (threadIdx.x == 0) {
    const bool counted = valid && any_not_finite == 0;
    out[row].loss = valid ? static_cast<double>(row_max) + log(static_cast<double>(sum_exp)) - target : NAN;
    out[row].top1 = counted && total_better == 0 ? 1 : 0;
    out[row].top5 = counted && total_better < 5 ? 1 : 0;
  }
}

// One block: the rows' sums in a fixed order, added to the accumulators.
__global__ void add_rows_kernel(int rows, const RowResult* __restrict__ results,
                                EvalAccumulators* __restrict__ totals) {
  __shared__ double loss[kThreads];
  __shared__ int top1[kThreads], top5[kThreads];
  double l = 0;
  int t1 = 0, t5 = 0;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) {
    l += results[i].loss;
    t1 += results[i].top1;
    t5 += results[i].top5;
  }
  loss[threadIdx.x] = l;
  top1[threadIdx.x] = t1;
  top5[threadIdx.x] = t5;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      loss[threadIdx.x] += loss[threadIdx.x + stride];
      top1[threadIdx.x] += top1[threadIdx.x + stride];
      top5[threadIdx.x] += top5[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    totals->loss_sum += loss[0];
    totals->top1 += static_cast<unsigned long long>(top1[0]);
    totals->top5 += static_cast<unsigned long long>(top5[0]);
    totals->images += static_cast<unsigned long long>(rows);
  }
}

}  // namespace

template <typename T>
void accumulate_classification_metrics(cudaStream_t stream, int rows, int classes, const T* logits,
                                       const int32_t* labels, EvalAccumulators* totals) {
  using D = DeviceTypeOf<T>;
  DTRAIN_CHECK(rows >= 0 && classes > 0) << "classification metrics: rows " << rows << ", classes " << classes;
  if (rows == 0) return;
  runtime::Buffer scratch(runtime::MemoryKind::kDevice, sizeof(RowResult) * static_cast<size_t>(rows), stream);
  auto* results = static_cast<RowResult*>(scratch.data());
  row_metrics_kernel<<<rows, kThreads, 0, stream>>>(classes, reinterpret_cast<const D*>(logits), labels, results);
  add_rows_kernel<<<1, kThreads, 0, stream>>>(rows, results, totals);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "classification metric kernels";
}

template void accumulate_classification_metrics<float>(cudaStream_t, int, int, const float*, const int32_t*,
                                                       EvalAccumulators*);
template void accumulate_classification_metrics<runtime::bfloat16>(cudaStream_t, int, int, const runtime::bfloat16*,
                                                                   const int32_t*, EvalAccumulators*);

}  // namespace dtrain::models::cuda
