#pragma once
// A model's flat parameter, gradient and state buffers in device memory, in the layout of its host
// ParameterSet (same slots, same offsets, backward order), plus the bf16 weight copy the layers of
// the bf16 path read. The fp32 buffers are the master copy the optimizer updates.
//
// One difference from the host layout: in the bf16 NHWC numerics a convolution weight is stored
// KRSC (cuDNN's NHWC filter layout) instead of KCRS. upload() and download() convert, so the host
// ParameterSet (initialization, checkpoints, tests) always sees the canonical KCRS layout.
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "models/cuda/gpu_context.h"
#include "models/parameter_set.h"
#include "runtime/memory/buffer.h"
#include "runtime/memory/dtype.h"

namespace dtrain::models::cuda {

class DeviceParameters {
 public:
  DeviceParameters(ParameterSet& layout, const GpuContext& context);

  // Host -> device: parameters and state; the bf16 copy is refreshed. Synchronous.
  void upload();
  // Device -> host: parameters and state, and the gradients when `gradients`. Synchronous.
  void download(bool gradients = false);

  // Any flat fp32 buffer shaped like the parameters (momentum too) between the standard layout,
  // which checkpoints and the CPU path hold, and this device's (4-D filters as [K, R, S, C] in the
  // channels-last numerics). Copies are ordered on the context's stream and have finished on
  // return, so the host buffer may go and kernels on that stream see the data.
  void upload_flat(const float* standard, float* device_dst);
  void download_flat(const float* device_src, float* standard);

  float* param(int id) { return params_f32() + layout_.slot(id).offset; }
  float* grad(int id) { return grads_f32() + layout_.slot(id).offset; }
  float* state(int id) { return state_f32() + layout_.state_slot(id).offset; }
  // The bf16 copy of parameter `id` (bf16 numerics only).
  runtime::bfloat16* param_bf16(int id);
  // The weights a layer computes with, in its activation type: the bf16 copy or the fp32 master.
  template <typename T>
  const T* weights(int id) {
    if constexpr (std::is_same_v<T, runtime::bfloat16>) {
      return param_bf16(id);
    } else {
      return param(id);
    }
  }

  float* params_f32() { return static_cast<float*>(params_.data()); }
  float* grads_f32() { return static_cast<float*>(grads_.data()); }
  float* state_f32() { return static_cast<float*>(state_.data()); }
  runtime::bfloat16* params_bf16() { return static_cast<runtime::bfloat16*>(params_bf16_.data()); }
  int64_t count() const { return layout_.flat_size(); }
  int64_t state_count() const { return layout_.state_count(); }
  ParameterSet& layout() { return layout_; }

  // Layers call gradient_ready(id) right after queueing the kernel that writes the gradient of
  // parameter id; the listener (a gradient synchronizer) gets its flat range.
  void set_gradient_listener(std::function<void(int64_t begin, int64_t end)> listener) {
    listener_ = std::move(listener);
  }
  void gradient_ready(int id) {
    if (listener_) listener_(layout_.slot(id).offset, layout_.slot(id).offset + layout_.slot(id).numel);
  }

 private:
  // Whether slot `id` is stored KRSC on the device.
  bool transposed(int id) const;
  // `standard` (count() values) with every transposed filter permuted to the device's layout.
  std::vector<float> in_device_layout(const float* standard) const;

  ParameterSet& layout_;
  const GpuContext& context_;
  runtime::Buffer params_, grads_, state_, params_bf16_;
  std::function<void(int64_t, int64_t)> listener_;
};

}  // namespace dtrain::models::cuda
