#include "models/cuda/device_parameters.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/cuda/cuda_check.h"

namespace dtrain::models::cuda {
namespace {

// [K, C, R, S] <-> [K, R, S, C]; `to_krsc` picks the direction.
void permute_filter(const runtime::Shape& kcrs, const float* src, float* dst, bool to_krsc) {
  const int64_t k_n = kcrs[0], c_n = kcrs[1], rs_n = kcrs[2] * kcrs[3];
  for (int64_t k = 0; k < k_n; ++k) {
    for (int64_t c = 0; c < c_n; ++c) {
      for (int64_t rs = 0; rs < rs_n; ++rs) {
        const int64_t canonical = (k * c_n + c) * rs_n + rs, krsc = (k * rs_n + rs) * c_n + c;
        if (to_krsc) {
          dst[krsc] = src[canonical];
        } else {
          dst[canonical] = src[krsc];
        }
      }
    }
  }
}

}  // namespace

DeviceParameters::DeviceParameters(ParameterSet& layout, const GpuContext& context)
    : layout_(layout), context_(context) {
  DTRAIN_CHECK(layout.finalized()) << "device parameters need a finalized parameter layout";
  runtime::DeviceGuard on(context.device());
  const size_t n = static_cast<size_t>(layout.flat_size());
  params_ = runtime::Buffer(runtime::MemoryKind::kDevice, n * sizeof(float));
  grads_ = runtime::Buffer(runtime::MemoryKind::kDevice, n * sizeof(float));
  state_ = runtime::Buffer(runtime::MemoryKind::kDevice, static_cast<size_t>(layout.state_count()) * sizeof(float));
  if (context.bf16()) params_bf16_ = runtime::Buffer(runtime::MemoryKind::kDevice, n * sizeof(runtime::bfloat16));
  DTRAIN_CUDA_CHECK(cudaMemset(grads_.data(), 0, grads_.bytes()));
}

bool DeviceParameters::transposed(int id) const {
  return context_.channels_last() && layout_.slot(id).shape.size() == 4;
}

runtime::bfloat16* DeviceParameters::param_bf16(int id) {
  DTRAIN_CHECK(context_.bf16()) << "a bf16 weight copy exists only in the bf16 numerics";
  return params_bf16() + layout_.slot(id).offset;
}

std::vector<float> DeviceParameters::in_device_layout(const float* standard) const {
  std::vector<float> staged(standard, standard + count());
  for (int id = 0; id < static_cast<int>(layout_.slots().size()); ++id) {
    const int64_t at = layout_.slot(id).offset;
    if (transposed(id)) permute_filter(layout_.slot(id).shape, standard + at, staged.data() + at, true);
  }
  return staged;
}

void DeviceParameters::upload_flat(const float* standard, float* device_dst) {
  runtime::DeviceGuard on(context_.device());
  const std::vector<float> staged = in_device_layout(standard);
  // Stream-ordered, then waited for: a plain cudaMemcpy from pageable memory may return before its
  // DMA has landed, and kernels on a non-blocking stream would not wait for it.
  DTRAIN_CUDA_CHECK(cudaMemcpyAsync(device_dst, staged.data(), staged.size() * sizeof(float), cudaMemcpyHostToDevice,
                                    context_.stream()));
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(context_.stream()));
}

void DeviceParameters::download_flat(const float* device_src, float* standard) {
  runtime::DeviceGuard on(context_.device());
  const size_t n = static_cast<size_t>(count());
  std::vector<float> staged(n);
  DTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(staged.data(), device_src, n * sizeof(float), cudaMemcpyDeviceToHost, context_.stream()));
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(context_.stream()));
  std::copy(staged.begin(), staged.end(), standard);
  for (int id = 0; id < static_cast<int>(layout_.slots().size()); ++id) {
    const int64_t at = layout_.slot(id).offset;
    if (transposed(id)) permute_filter(layout_.slot(id).shape, staged.data() + at, standard + at, false);
  }
}

void DeviceParameters::upload() {
  runtime::DeviceGuard on(context_.device());
  const std::vector<float> staged = in_device_layout(layout_.params_flat());
  const size_t n = staged.size();
  DTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(params_f32(), staged.data(), n * sizeof(float), cudaMemcpyHostToDevice, context_.stream()));
  DTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(state_f32(), layout_.state_flat(), state_.bytes(), cudaMemcpyHostToDevice, context_.stream()));
  std::vector<runtime::bfloat16> narrow;
  if (context_.bf16()) {  // the bf16 copy, from the same device-layout values
    narrow.resize(n);
    for (size_t i = 0; i < n; ++i) narrow[i] = runtime::to_bfloat16(staged[i]);
    DTRAIN_CUDA_CHECK(cudaMemcpyAsync(params_bf16(), narrow.data(), n * sizeof(runtime::bfloat16),
                                      cudaMemcpyHostToDevice, context_.stream()));
  }
  // The host buffers above live until here: the copies from them are ordered on the stream.
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(context_.stream()));
}

void DeviceParameters::download(bool gradients) {
  runtime::DeviceGuard on(context_.device());
  download_flat(params_f32(), layout_.params_flat());
  if (gradients) download_flat(grads_f32(), layout_.grads_flat());
  DTRAIN_CUDA_CHECK(
      cudaMemcpyAsync(layout_.state_flat(), state_f32(), state_.bytes(), cudaMemcpyDeviceToHost, context_.stream()));
  DTRAIN_CUDA_CHECK(cudaStreamSynchronize(context_.stream()));
}

}  // namespace dtrain::models::cuda
