#pragma once
// A model's parameters and gradients, each in ONE flat fp32 buffer, laid out in backward order:
// the parameters registered last (the classifier) come first, the first convolution last. Backward
// produces gradients front to back through the buffer, so a gradient bucket is a contiguous slice
// that is complete as soon as backward has passed it, and its all-reduce can start while backward
// goes on with the layers before it.
//
// Registration happens while the model is built (forward order); finalize() fixes the layout and
// allocates. Every slot starts at a multiple of kSlotAlignment elements (the gaps stay zero): the
// GPU's bf16 weight copy has the same offsets, and cuDNN and cuBLAS fall back to slow kernels for
// tensors not 16-byte aligned. Without it a 100-class ResNet-50 (a 204,900-element classifier
// first in the buffer) trained at 59 img/s instead of 6,000 on an H200. Batch-norm running statistics live in a second
// pair of flat buffers ("state"), which are broadcast at start but not all-reduced or decayed.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/memory/tensor.h"

namespace dtrain::models {

enum class ParamKind : uint8_t {
  kWeight,     // conv / linear weights: weight decay applies
  kNormScale,  // batch-norm gamma: optionally excluded from decay
  kBias,       // biases and batch-norm beta: optionally excluded from decay
};

struct ParamSlot {
  std::string name;
  runtime::Shape shape;
  ParamKind kind = ParamKind::kWeight;
  int64_t numel = 0;
  int64_t offset = -1;  // into the flat buffers, set by finalize()
};

class ParameterSet {
 public:
  // Returns the id the owner uses to reach its slice.
  int add(std::string name, runtime::Shape shape, ParamKind kind);
  // Running statistics and other non-trained state.
  int add_state(std::string name, int64_t numel);
  void finalize();
  bool finalized() const { return finalized_; }

  float* param(int id);
  float* grad(int id);
  float* state(int id);
  const ParamSlot& slot(int id) const { return slots_.at(static_cast<size_t>(id)); }
  const std::vector<ParamSlot>& slots() const { return slots_; }
  // The id of the parameter (or state) registered under `name`; an Error naming it if none is.
  int find(const std::string& name) const;
  int find_state(const std::string& name) const;
  const ParamSlot& state_slot(int id) const { return state_slots_.at(static_cast<size_t>(id)); }
  const std::vector<ParamSlot>& state_slots() const { return state_slots_; }

  // Backward reports each parameter's gradient as soon as it is written, so a gradient
  // synchronizer can start on completed buckets: listener(begin, end) gets the flat element range.
  void set_gradient_listener(std::function<void(int64_t begin, int64_t end)> listener) {
    listener_ = std::move(listener);
  }
  void gradient_ready(int id) {
    if (listener_) listener_(slot(id).offset, slot(id).offset + slot(id).numel);
  }

  static constexpr int64_t kSlotAlignment = 64;  // elements: 256 bytes in fp32, 128 in bf16
  // Trained parameters (what a model card states).
  int64_t parameter_count() const { return parameters_; }
  // Elements of the flat parameter and gradient buffers: the parameters and the alignment gaps.
  int64_t flat_size() const { return total_; }
  int64_t state_count() const { return state_total_; }
  float* params_flat() { return params_.data<float>(); }
  // The host gradients are allocated (zeroed) on first use: the GPU path keeps its gradients on the
  // device and never needs these (about 100 MB for ResNet-50) unless a test or check asks.
  float* grads_flat();
  bool has_host_gradients() const { return grads_.numel() > 0; }
  float* state_flat() { return state_.data<float>(); }

 private:
  std::vector<ParamSlot> slots_;
  std::vector<ParamSlot> state_slots_;
  int64_t total_ = 0;
  int64_t parameters_ = 0;
  int64_t state_total_ = 0;
  bool finalized_ = false;
  runtime::Tensor params_;
  runtime::Tensor grads_;
  runtime::Tensor state_;
  std::function<void(int64_t, int64_t)> listener_;
};

}  // namespace dtrain::models
