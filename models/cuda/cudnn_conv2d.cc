#include "models/cuda/cudnn_conv2d.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "runtime/core/cuda/cuda_check.h"
#include "runtime/core/log.h"

namespace dtrain::models::cuda {
namespace {

// What makes two convolutions choose the same algorithm: shape, numerics and TF32 permission.
// (Device type is fixed for a process: one rank drives one GPU.)
using CacheKey = std::tuple<int, int, int, int, int, int, int, int, int, int, int, int, bool, int>;  // ..., pass

struct CachedChoice {
  int algorithm;
  size_t workspace_bytes;
  cudnnMathType_t math;
  float measured_ms;
};

std::mutex cache_mutex;
size_t measurement_count = 0;  // guarded by cache_mutex
std::map<CacheKey, CachedChoice>& algorithm_cache() {
  static std::map<CacheKey, CachedChoice> cache;
  return cache;
}

CacheKey key_of(const Conv2dShape& g, ConvNumerics numerics, bool allow_tf32, int pass) {
  return {g.batch,    g.in_channels, g.in_h,     g.in_w,  g.out_channels, g.kernel_h,
          g.kernel_w, g.stride_h,    g.stride_w, g.pad_h, g.pad_w,        static_cast<int>(numerics),
          allow_tf32, pass};
}

// The most workspace a measured algorithm may ask for: algorithms wanting more are not considered.
// A quarter of the free memory, at most 1 GiB, leaves room for the model's activations.
size_t workspace_limit() {
  size_t free_bytes = 0, total_bytes = 0;
  DTRAIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return std::min<size_t>(free_bytes / 4, size_t{1} << 30);
}

// The fastest successful result of a cudnnFind, or an error naming the layer.
template <typename Perf>
const Perf& fastest(const Perf* results, int count, const Conv2dShape& g, const char* pass) {
  for (int i = 0; i < count; ++i) {
    if (results[i].status == CUDNN_STATUS_SUCCESS) return results[i];  // cuDNN sorts by time
  }
  DTRAIN_FAIL() << "cuDNN found no usable " << pass << " algorithm for convolution " << g.describe();
}

}  // namespace

size_t CudnnConv2d::measurements_made() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  return measurement_count;
}

CudnnConv2d::CudnnConv2d(cudnnHandle_t handle, const Conv2dShape& geometry, ConvNumerics numerics, bool allow_tf32)
    : handle_(handle), geometry_(geometry), numerics_(numerics), allow_tf32_(allow_tf32) {
  const Conv2dShape& g = geometry_;
  validate(g);
  const bool bf16 = numerics == ConvNumerics::kBf16Nhwc;
  const cudnnDataType_t data = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  const cudnnTensorFormat_t format = bf16 ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  DTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_desc_));
  DTRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_desc_));
  DTRAIN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_desc_));
  DTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_desc_, format, data, g.batch, g.in_channels, g.in_h, g.in_w));
  DTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_desc_, format, data, g.batch, g.out_channels, g.out_h(), g.out_w()));
  DTRAIN_CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(w_desc_, data, format, g.out_channels, g.in_channels, g.kernel_h, g.kernel_w));
  // Cross-correlation, as every framework's "convolution"; accumulation in fp32 for both numerics.
  // FMA math excludes tensor-core (TF32) kernels for fp32; bf16 needs tensor cores.
  const cudnnMathType_t math = bf16 ? CUDNN_TENSOR_OP_MATH : (allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
  for (cudnnConvolutionDescriptor_t* desc : {&forward_desc_, &backward_data_desc_, &backward_filter_desc_}) {
    DTRAIN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(desc));
    DTRAIN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(*desc, g.pad_h, g.pad_w, g.stride_h, g.stride_w, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(*desc, math));
  }
}

CudnnConv2d::~CudnnConv2d() {
  cudnnDestroyConvolutionDescriptor(forward_desc_);
  cudnnDestroyConvolutionDescriptor(backward_data_desc_);
  cudnnDestroyConvolutionDescriptor(backward_filter_desc_);
  cudnnDestroyFilterDescriptor(w_desc_);
  cudnnDestroyTensorDescriptor(y_desc_);
  cudnnDestroyTensorDescriptor(x_desc_);
}

// A device Buffer on the handle's stream. It goes back to the cache when the pass returns: the
// allocator hands it out again only for work on the same stream, which runs after the convolution.
core::Buffer CudnnConv2d::workspace(size_t bytes) const {
  cudaStream_t stream = nullptr;
  DTRAIN_CUDNN_CHECK(cudnnGetStream(handle_, &stream));
  return core::Buffer(core::MemoryKind::kDevice, bytes, stream);
}

// On a pass's first use: the cached choice for this shape, or a measurement of every algorithm with
// cudnnFind...Ex on the caller's real buffers (which the real call then overwrites). The measuring
// workspace is a plain cudaMalloc, freed at once: find synchronizes anyway, and a block that large
// should not stay in the caching allocator.
template <typename Perf, typename Find>
void CudnnConv2d::choose(Pass& pass, cudnnConvolutionDescriptor_t desc, int pass_index, const char* name, Find find) {
  if (pass.chosen) return;
  const CacheKey key = key_of(geometry_, numerics_, allow_tf32_, pass_index);
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto found = algorithm_cache().find(key);
  if (found == algorithm_cache().end()) {
    const size_t limit = workspace_limit();
    void* space = nullptr;
    DTRAIN_CUDA_CHECK(cudaMalloc(&space, limit)) << "workspace for measuring " << name << " algorithms";
    Perf results[16];
    int count = 0;
    const cudnnStatus_t status = find(results, &count, space, limit);
    cudaFree(space);
    DTRAIN_CUDNN_CHECK(status) << "measuring " << name << " algorithms for convolution " << geometry_.describe();
    ++measurement_count;
    const Perf& best = fastest(results, count, geometry_, name);
    found = algorithm_cache()
                .emplace(key, CachedChoice{static_cast<int>(best.algo), best.memory, best.mathType, best.time})
                .first;
  }
  // DTRAIN_LOG_LEVEL=debug lists each layer's pass with its measured time (once per layer, cached
  // shapes included): summed over a model, the convolutions' share of a step.
  DTRAIN_LOG(kDebug) << "cuDNN " << name << " " << geometry_.describe() << ": algorithm " << found->second.algorithm
                     << " " << found->second.measured_ms << " ms";
  pass = Pass{true, found->second.algorithm, found->second.workspace_bytes};
  // The algorithm must run with the math type it was measured with (cuDNN's rule for find results).
  DTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(desc, found->second.math));
}

void CudnnConv2d::forward(const void* x, const void* w, void* y) {
  choose<cudnnConvolutionFwdAlgoPerf_t>(
      forward_, forward_desc_, 0, "forward", [&](auto* results, int* count, void* space, size_t limit) {
        return cudnnFindConvolutionForwardAlgorithmEx(handle_, x_desc_, x, w_desc_, w, forward_desc_, y_desc_, y, 16,
                                                      count, results, space, limit);
      });
  const float one = 1.0f, zero = 0.0f;
  core::Buffer space = workspace(forward_.workspace_bytes);
  DTRAIN_CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, x_desc_, x, w_desc_, w, forward_desc_,
                                             static_cast<cudnnConvolutionFwdAlgo_t>(forward_.algorithm), space.data(),
                                             forward_.workspace_bytes, &zero, y_desc_, y))
      << "convolution forward " << geometry_.describe();
}

void CudnnConv2d::backward_data(const void* dy, const void* w, void* dx, bool accumulate) {
  // Measuring writes the output; when dx already holds a gradient to add to, measure elsewhere.
  core::Buffer measuring_output;
  void* measured_dx = dx;
  if (accumulate && !backward_data_.chosen) {
    const size_t element_bytes = numerics_ == ConvNumerics::kBf16Nhwc ? 2 : 4;
    measuring_output =
        core::Buffer(core::MemoryKind::kDevice, element_bytes * static_cast<size_t>(geometry_.input_size()));
    measured_dx = measuring_output.data();
  }
  choose<cudnnConvolutionBwdDataAlgoPerf_t>(backward_data_, backward_data_desc_, 1, "backward-data",
                                            [&](auto* results, int* count, void* space, size_t limit) {
                                              return cudnnFindConvolutionBackwardDataAlgorithmEx(
                                                  handle_, w_desc_, w, y_desc_, dy, backward_data_desc_, x_desc_,
                                                  measured_dx, 16, count, results, space, limit);
                                            });
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  core::Buffer space = workspace(backward_data_.workspace_bytes);
  DTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &one, w_desc_, w, y_desc_, dy, backward_data_desc_,
                                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(backward_data_.algorithm),
                                                  space.data(), backward_data_.workspace_bytes, &beta, x_desc_, dx))
      << "convolution backward data " << geometry_.describe();
}

void CudnnConv2d::backward_filter(const void* x, const void* dy, void* dw) {
  choose<cudnnConvolutionBwdFilterAlgoPerf_t>(backward_filter_, backward_filter_desc_, 2, "backward-filter",
                                              [&](auto* results, int* count, void* space, size_t limit) {
                                                return cudnnFindConvolutionBackwardFilterAlgorithmEx(
                                                    handle_, x_desc_, x, y_desc_, dy, backward_filter_desc_, w_desc_,
                                                    dw, 16, count, results, space, limit);
                                              });
  const float one = 1.0f, zero = 0.0f;
  core::Buffer space = workspace(backward_filter_.workspace_bytes);
  DTRAIN_CUDNN_CHECK(
      cudnnConvolutionBackwardFilter(handle_, &one, x_desc_, x, y_desc_, dy, backward_filter_desc_,
                                     static_cast<cudnnConvolutionBwdFilterAlgo_t>(backward_filter_.algorithm),
                                     space.data(), backward_filter_.workspace_bytes, &zero, w_desc_, dw))
      << "convolution backward filter " << geometry_.describe();
}

}  // namespace dtrain::models::cuda
