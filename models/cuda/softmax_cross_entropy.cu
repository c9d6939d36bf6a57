#include "models/cuda/softmax_cross_entropy.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/device_elements.cuh"
#include "runtime/memory/buffer.h"

namespace dtrain::models::cuda {
namespace {

using runtime::cuda::DeviceTypeOf;
using runtime::cuda::load;
using runtime::cuda::store;

constexpr int kThreads = 256;

// Block-wide reduction of one value per thread (max or sum), result broadcast to every thread.
template <bool kMax>
__device__ float block_reduce(float v, float* shared) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_down_sync(0xffffffffu, v, offset);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < blockDim.x / 32 ? shared[lane] : (kMax ? -INFINITY : 0.0f);
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_down_sync(0xffffffffu, v, offset);
      v = kMax ? fmaxf(v, other) : v + other;
    }
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  const float result = shared[0];
  __syncthreads();
  return result;
}

// One block per row: max, log-sum-exp, the row's loss and hit, and the row's gradient.
//   loss = logsumexp - sum_j target_j * logit_j
template <typename T>
__global__ void row_kernel(int batch, int classes, const T* __restrict__ logits, const int32_t* __restrict__ labels,
                           float smoothing, T* __restrict__ dlogits, float* __restrict__ row_loss,
                           int32_t* __restrict__ row_hit) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  const T* z = logits + int64_t{row} * classes;
  const int label = labels[row];
  const bool valid = label >= 0 && label < classes;
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < classes; j += blockDim.x) local_max = fmaxf(local_max, load(z, j));
  const float row_max = block_reduce<true>(local_max, shared);
  float local_sum = 0.0f, local_z = 0.0f;
  for (int j = threadIdx.x; j < classes; j += blockDim.x) {
    const float v = load(z, j);
    local_sum += __expf(v - row_max);
    local_z += v;
  }
  const float sum_exp = block_reduce<false>(local_sum, shared);
  const float sum_z = block_reduce<false>(local_z, shared);
  const float off = smoothing / classes;
  // The hit: the label's logit is the maximum and no earlier index reaches it (argmax takes the first).
  int local_earlier_max = 0;
  const float label_logit = valid ? load(z, label) : NAN;
  for (int j = threadIdx.x; j < classes; j += blockDim.x) {
    const float v = load(z, j);
    if (j < label && v >= label_logit) local_earlier_max = 1;
    store(dlogits + int64_t{row} * classes, j,
          (__expf(v - row_max) / sum_exp - off - (j == label ? 1.0f - smoothing : 0.0f)) / batch);
  }
  const float earlier = block_reduce<false>(static_cast<float>(local_earlier_max), shared);
  if (threadIdx.x == 0) {
    const float log_sum_exp = row_max + logf(sum_exp);
    row_loss[row] = valid ? log_sum_exp - (1.0f - smoothing) * label_logit - off * sum_z : NAN;
    row_hit[row] = valid && label_logit >= row_max && earlier == 0.0f ? 1 : 0;
  }
}

// One block: the batch mean of the row losses (in double, in a fixed order) and the hit count.
__global__ void mean_kernel(int batch, const float* __restrict__ row_loss, const int32_t* __restrict__ row_hit,
                            float* __restrict__ mean_loss, int32_t* __restrict__ hits) {
  __shared__ double loss_shared[kThreads];
  __shared__ int hit_shared[kThreads];
  double loss = 0;
  int hit = 0;
  for (int i = threadIdx.x; i < batch; i += blockDim.x) {
    loss += row_loss[i];
    hit += row_hit[i];
  }
  loss_shared[threadIdx.x] = loss;
  hit_shared[threadIdx.x] = hit;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      loss_shared[threadIdx.x] += loss_shared[threadIdx.x + stride];
      hit_shared[threadIdx.x] += hit_shared[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *mean_loss = static_cast<float>(loss_shared[0] / batch);
    if (hits != nullptr) *hits = hit_shared[0];
  }
}

}  // namespace

template <typename T>
void softmax_cross_entropy(cudaStream_t stream, int batch, int classes, const T* logits, const int32_t* labels,
                           float smoothing, T* dlogits, LossOutputs out) {
  using D = DeviceTypeOf<T>;
  DTRAIN_CHECK(batch > 0 && classes > 0 && smoothing >= 0 && smoothing < 1)
      << "softmax cross-entropy: batch " << batch << ", classes " << classes << ", smoothing " << smoothing;
  DTRAIN_CHECK(out.mean_loss != nullptr) << "softmax cross-entropy needs a device scalar for the loss";
  // Row results in a device Buffer on `stream`: its reuse after release is ordered on that stream.
  runtime::Buffer scratch(runtime::MemoryKind::kDevice, size_t(batch) * (sizeof(float) + sizeof(int32_t)), stream);
  float* row_loss = static_cast<float*>(scratch.data());
  int32_t* row_hit = reinterpret_cast<int32_t*>(row_loss + batch);
  row_kernel<<<batch, kThreads, 0, stream>>>(batch, classes, reinterpret_cast<const D*>(logits), labels, smoothing,
                                             reinterpret_cast<D*>(dlogits), row_loss, row_hit);
  mean_kernel<<<1, kThreads, 0, stream>>>(batch, row_loss, row_hit, out.mean_loss, out.top1_hits);
  DTRAIN_CUDA_CHECK(cudaGetLastError()) << "softmax cross-entropy kernels";
}

template void softmax_cross_entropy<float>(cudaStream_t, int, int, const float*, const int32_t*, float, float*,
                                           LossOutputs);
template void softmax_cross_entropy<runtime::bfloat16>(cudaStream_t, int, int, const runtime::bfloat16*, const int32_t*,
                                                       float, runtime::bfloat16*, LossOutputs);

}  // namespace dtrain::models::cuda
